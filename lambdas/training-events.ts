export { handler } from '../src/runtimes/lambda/training-events';
