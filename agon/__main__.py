import sys

from agon.cli import main

sys.exit(main())
