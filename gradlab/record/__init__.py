"""`gradlab record`: the calls a real program makes to custom Functions and ops, as specs.

`hook` and `wrap` run inside the recorded processes (standalone: the standard library and
torch), `boot/sitecustomize.py` starts them; `merge` reads what they stored, `specs` writes the
spec folder, `shim` makes a script's or a checkout's definitions importable from it, `command`
runs the command and finishes the folder.
"""
