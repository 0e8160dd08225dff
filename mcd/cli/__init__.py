"""The command line (`mcd …`): argument parsing, exit codes and the one-shot commands.

`main` dispatches; `oncefrom`, `firstboot` and `checkdisk` are the commands that act on a node root
without a cluster; `mcd start --node-name` hands over to `mcd.agent`.
"""
