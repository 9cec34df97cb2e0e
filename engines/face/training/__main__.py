import sys

from engines.face.training.train import main

sys.exit(main())
