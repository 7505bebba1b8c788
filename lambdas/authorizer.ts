export { handler } from '../src/runtimes/lambda/authorizer';
