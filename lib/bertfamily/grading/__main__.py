import sys

from bertfamily.grading.cli import main

sys.exit(main())
