// Keep test output readable: the local stack logs every request at INFO otherwise.
process.env.SIFT_LOG_LEVEL = process.env.SIFT_LOG_LEVEL ?? 'ERROR';
process.env.AWS_REGION = process.env.AWS_REGION ?? 'us-east-1';
