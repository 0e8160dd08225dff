"""Host layer: the only part of mcd that touches a node (paths under the root, files, accounts, commands)."""
