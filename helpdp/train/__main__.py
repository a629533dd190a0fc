"""``python -m helpdp.train [train=cpu_smoke|b200|b200_rehearsal] key=value ...``.

Under ``accelerate launch --num_processes N`` every rank runs this command: rank 0
alone claims ``out=`` (the guard of :mod:`helpdp.cliconf.outdir`: its lock, its record);
the other ranks write into it only after rank 0 has (a barrier in ``build_trainer``).
``resume=`` implies ``overwrite=true``: a resumed run writes into its own ``out=``,
which a killed run leaves without a record and which differs in ``resume``/steps.
"""

from __future__ import annotations

import sys

from collect.awm.sandbox import COMMAND_ERRORS
from helpdp.cliconf import Usage, run_app
from helpdp.cliconf.outdir import pop_overwrite
from helpdp.train.config import TrainConfig
from helpdp.train.ranks import dist_rank
from helpdp.train.trainer import run_cli

USAGE = "python -m helpdp.train [train=cpu_smoke|b200|b200_rehearsal] key=value ..."


def command_args(argv: list[str], rank: int) -> list[str]:
    """The arguments this rank hands to the app (see the module's docstring).

    >>> command_args(["resume=last"], 0)
    ['resume=last', 'overwrite=true']
    >>> command_args(["resume=last", "overwrite=false"], 1)
    ['resume=last']
    """
    args = list(argv)
    resumes = any(a.partition("=")[0] == "resume" and a.partition("=")[2] for a in args)
    if resumes and not any(a.partition("=")[0] == "overwrite" for a in args):
        args.append("overwrite=true")
    if rank > 0:
        args, _ = pop_overwrite("helpdp.train", args)
    return args


def main() -> None:
    rank, _ = dist_rank()
    run_app(
        "helpdp.train",
        TrainConfig,
        run_cli,
        config_name="train",
        groups=("train",),
        usage=Usage(USAGE),
        errors=COMMAND_ERRORS,
        argv=command_args(sys.argv[1:], rank),
        out_dir=rank == 0,
    )


if __name__ == "__main__":
    main()
