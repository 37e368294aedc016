"""Entry point of the kfn Python function host: python3 -u kfn_main.py.

It imports the host package kfnhost (so its bytecode can be cached) and then
takes the host's directory off sys.path, so that the function's own modules
never collide with the host's files.
"""

import os
import sys

import kfnhost.main

_here = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or '.') == _here:
    del sys.path[0]

sys.exit(kfnhost.main.main())
