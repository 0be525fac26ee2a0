"""python -m concord.admin"""

import sys

from . import main


sys.exit(main())
