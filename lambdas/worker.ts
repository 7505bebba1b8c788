export { handler } from '../src/runtimes/lambda/worker';
