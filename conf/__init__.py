"""The Hydra configs of every command: one primary YAML per command (``<name>.yaml``) and
one folder per config group (``collect/``, ``helper/``, ``prm/``, ``train/``). Not code:
a package only so that the wheel carries it and :data:`helpdp.cliconf.CONF_DIR` finds it
wherever it is installed."""
