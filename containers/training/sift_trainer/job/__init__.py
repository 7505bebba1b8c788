"""The training job: ``python -m sift_trainer.job`` (SageMaker's ``train``, or locally with SIFT_JOB_DIR)."""
