export { handler } from '../src/runtimes/lambda/workflow';
