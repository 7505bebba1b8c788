import sys

from .job.train import main

sys.exit(main())
