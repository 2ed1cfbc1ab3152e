import sys

from esnb.cli import main

sys.exit(main())
