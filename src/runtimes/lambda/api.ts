/** The control plane on Lambda: API Gateway REST proxy → the shared router. */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import { captureLambdaHandler } from '@aws-lambda-powertools/tracer/middleware';
import middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { SiftApp } from '../../http/app';
import { allRoutes } from '../../http/routes';
import { composeLambda, lambdaSettings } from './compose';
import { fromApiGatewayEvent, toApiGatewayResult } from './apiGateway';
import { logger, metrics, siftLogger, tracer } from './observability';

// Built once per container; Lambdas share rate-limit windows through DynamoDB.
const svc = composeLambda(lambdaSettings(), { launchers: true });
const app = new SiftApp(svc, allRoutes(), siftLogger);

async function handle(event: APIGatewayProxyEvent): Promise<APIGatewayProxyResult> {
  const response = await app.handle(fromApiGatewayEvent(event));
  // Low-cardinality dimensions only (never per team): the finance dashboard reads these.
  metrics.addMetric('Requests', MetricUnit.Count, 1);
  return toApiGatewayResult(response);
}

export const handler = middy(handle)
  .use(captureLambdaHandler(tracer))
  .use(injectLambdaContext(logger))
  .use(logMetrics(metrics, { captureColdStartMetric: true }));
