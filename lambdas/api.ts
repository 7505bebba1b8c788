export { handler } from '../src/runtimes/lambda/api';
