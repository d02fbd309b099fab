"""The `gpu-admission` command: argument parsing and exit codes, one module per command group.

``main`` builds the parser, importing only the module of the command given;
``offline`` holds check, explain and the policy commands, ``certs`` the
certificate commands, ``install`` install and uninstall, ``manifests`` the
generated files of deploy/, ``completion`` the shell completion scripts.
Commands call the wings below and print; nothing imports the CLI.
"""
