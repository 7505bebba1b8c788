from .job.train import main
import sys

sys.exit(main())
