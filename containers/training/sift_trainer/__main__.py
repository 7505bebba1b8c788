from .train import main
import sys

sys.exit(main())
