import FindMyWay from 'find-my-way';
import { authenticate } from '../core/apiKeys';
import type { Principal, Services } from '../core/context';
import {
  ApiError,
  ForbiddenError,
  MethodNotAllowedError,
  NotFoundError,
  PayloadTooLargeError,
  StoreUnavailableError,
  UnauthorizedError,
  UnsupportedMediaTypeError,
  ValidationError,
} from '../core/errors';
import { newUuid } from '../core/ids';
import { enforceEdgeLimit, enforceLimits, type RateLimitHeaders } from '../core/rateLimits';
import { recordRequest } from '../core/usage';
import type { Logger } from './logger';
import { preflightResponse, withCors } from './cors';
import { errorFormatFor, renderError } from './errorFormats';
import { INTERNAL_TOKEN_HEADER, internalTokenMatches } from './internalAuth';
import { jsonBodyProblem } from './jsonBody';
import type { ApiRequest, ApiResponse, HttpMethod, RouteSpec } from './types';
import { parseWith } from './validation';

const METHODS: HttpMethod[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
const REQUEST_ID_RE = /^[A-Za-z0-9._-]{8,128}$/;

/**
 * The one request pipeline shared by every runtime: edge limit → route → auth → endpoint limit →
 * parse/validate → handler → usage counters. Adapters only translate requests and responses.
 */
export class SiftApp {
  // find-my-way matches no parameter over 100 characters by default: a 128-character project or
  // dataset name (validation.ts resourceName) must still address its routes
  private readonly router = FindMyWay({ caseSensitive: true, ignoreTrailingSlash: false, maxParamLength: 256 });

  constructor(
    private readonly svc: Services,
    readonly routes: RouteSpec[],
    private readonly logger: Logger,
  ) {
    for (const spec of routes) this.router.on(spec.method, spec.path, () => undefined, { spec });
  }

  async handle(req: ApiRequest): Promise<ApiResponse> {
    // a CORS preflight carries no key and reaches no route (API Gateway answers it itself on AWS)
    const preflight = preflightResponse(this.svc.config.consoleOrigins, req.method, req.headers);
    if (preflight) return preflight;
    const incoming = req.headers['x-request-id'];
    const requestId = incoming && REQUEST_ID_RE.test(incoming) ? incoming : newUuid();
    const started = performance.now();
    let rateHeaders: RateLimitHeaders | undefined;
    let response: ApiResponse;
    let spec: RouteSpec | undefined;
    let principal: Principal | undefined;
    try {
      const now = this.svc.now();
      // Until the endpoint's own limit is known, the edge window is the one reported.
      rateHeaders = await enforceEdgeLimit(this.svc.rateLimiter, req.sourceIp, now);
      const matched = this.match(req);
      spec = matched.spec;
      if (spec.auth === 'internal') {
        if (!internalTokenMatches(req.headers[INTERNAL_TOKEN_HEADER]))
          throw new NotFoundError(`No route for ${req.method} ${req.path}`);
      } else {
        principal = spec.auth === 'public' ? await this.optionalPrincipal(req) : await authenticate(this.svc, req);
      }
      if (spec.auth === 'operator' && principal?.role !== 'operator')
        throw new ForbiddenError("This operation needs the installation's operator key");
      rateHeaders = await enforceLimits(
        this.svc.rateLimiter,
        principal ? `team:${principal.team_id}` : `ip:${req.sourceIp}`,
        spec.limit ?? 'default',
        now,
      );
      // an optional body schema lets clients send nothing at all (e.g. POST …/deploy)
      const empty = !req.body || req.body.length === 0;
      const body = spec.body
        ? empty && spec.body.safeParse(undefined).success
          ? undefined
          : parseWith(spec.body, spec.bodyType === 'multipart' ? await this.readForm(req) : this.readJson(req), 'body')
        : this.rejectBody(req);
      const query = spec.query ? parseWith(spec.query, req.query, 'query') : undefined;
      const params = spec.params ? parseWith(spec.params, matched.params, 'path') : matched.params;
      response = await spec.handler({
        svc: this.svc,
        req,
        requestId,
        principal: principal as Principal,
        body,
        query,
        params,
      });
    } catch (err) {
      response = this.errorResponse(err, requestId, req, spec);
    }
    // Every request of a known caller counts, failed ones included (they count against limits too).
    if (principal && spec) {
      await recordRequest(this.svc, principal.team_id, spec.limit ?? 'default').catch((error) =>
        this.logger.error('usage counter update failed', { request_id: requestId, error }),
      );
    }
    const headers: Record<string, string> = {
      ...(rateHeaders ?? {}),
      ...(response.headers ?? {}),
      'x-request-id': requestId,
    };
    // The Anthropic SDK reads `request-id`, the OpenAI SDK `x-request-id`: compat paths send both.
    if (req.path.startsWith('/v1/')) headers['request-id'] = requestId;
    if (response.body !== undefined && !response.stream && response.raw === undefined) {
      headers['content-type'] ??= 'application/json';
    }
    this.logger.info('request', {
      request_id: requestId,
      method: req.method,
      path: spec?.path ?? req.path,
      status: response.status,
      latency_ms: Math.round((performance.now() - started) * 100) / 100,
    });
    // every answer, errors included: a browser hides a response without it from the page
    return { ...response, headers: this.corsHeaders(req.headers.origin, headers) };
  }

  /** The CORS headers for a response to `origin`, merged over `headers` (src/http/cors.ts); the node adapter's own answers use it too. */
  corsHeaders(origin: string | undefined, headers: Record<string, string> = {}): Record<string, string> {
    return withCors(this.svc.config.consoleOrigins, origin, headers);
  }

  private match(req: ApiRequest): { spec: RouteSpec; params: Record<string, string> } {
    const found = this.find(req.method, req.path);
    if (found?.fits) return found;
    // A method counts as allowed only where its route takes this path's parameters:
    // `/core/datasets/upload/url` also matches `GET /core/datasets/:name/:version`, whose version is a number.
    const allowed = METHODS.filter((m) => m !== req.method && this.find(m, req.path)?.fits);
    if (allowed.length > 0) {
      const err = new MethodNotAllowedError(
        `Method ${req.method} is not allowed on ${req.path}; allowed: ${allowed.join(', ')}`,
      );
      err.headers.allow = allowed.join(', ');
      throw err;
    }
    // the route exists but its path parameters are invalid: validation names them (422)
    if (found) return found;
    const hint = this.router.find('POST', `/v1${req.path}`) ? ' (the compatible API lives under /v1)' : '';
    throw new NotFoundError(`No route for ${req.method} ${req.path}${hint}`);
  }

  private find(
    method: string,
    path: string,
  ): { spec: RouteSpec; params: Record<string, string>; fits: boolean } | undefined {
    const found = this.router.find(method as HttpMethod, path);
    if (!found) return undefined;
    const { spec } = found.store as { spec: RouteSpec };
    const params = found.params as Record<string, string>;
    return { spec, params, fits: !spec.params || spec.params.safeParse(params).success };
  }

  /** Public routes still count usage for a caller who sent a valid key; a bad key is ignored there. */
  private async optionalPrincipal(req: ApiRequest): Promise<Principal | undefined> {
    if (!req.headers['x-api-key'] && !req.headers.authorization) return undefined;
    try {
      return await authenticate(this.svc, req);
    } catch (err) {
      // a key that is not valid is ignored here; a store that could not check it is an error (503)
      if (err instanceof UnauthorizedError) return undefined;
      throw err;
    }
  }

  private bodyWithin(req: ApiRequest, kind: string): Buffer {
    const raw = req.body;
    if (raw && raw.length > this.svc.config.maxBodyBytes) {
      throw new PayloadTooLargeError(`Request body is larger than the ${this.svc.config.maxBodyBytes} byte limit`);
    }
    if (!raw || raw.length === 0)
      throw ValidationError.field(['body'], `A ${kind} request body is required`, 'missing');
    return raw;
  }

  /** A multipart/form-data body as `{field: string | File}`, parsed by the platform's own WHATWG FormData parser (undici). */
  private async readForm(req: ApiRequest): Promise<Record<string, unknown>> {
    const raw = this.bodyWithin(req, 'multipart/form-data');
    const type = req.headers['content-type'] ?? '';
    if (!/^multipart\/form-data\b/i.test(type)) {
      throw new UnsupportedMediaTypeError(`Content-Type must be multipart/form-data, got '${type}'`);
    }
    try {
      return Object.fromEntries(await new Response(raw, { headers: { 'content-type': type } }).formData());
    } catch (err) {
      throw ValidationError.field(['body'], `Malformed multipart body: ${(err as Error).message}`, 'multipart_invalid');
    }
  }

  private readJson(req: ApiRequest): unknown {
    const raw = this.bodyWithin(req, 'JSON');
    const type = req.headers['content-type'];
    if (type && !/^application\/([\w.+-]+\+)?json\b/i.test(type)) {
      throw new UnsupportedMediaTypeError(`Content-Type must be application/json, got '${type}'`);
    }
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(raw);
    } catch {
      throw ValidationError.field(['body'], 'Request body is not valid UTF-8', 'json_invalid');
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      throw ValidationError.field(['body'], `Malformed JSON: ${(err as Error).message}`, 'json_invalid');
    }
    // too deep, a non-finite number, a `__proto__` key: refused here, before anything recurses over it (jsonBody.ts)
    const problem = jsonBodyProblem(value);
    if (problem) throw new ValidationError([problem]);
    return value;
  }

  /** Routes without a body schema take none, so nothing a client sends is silently dropped. */
  private rejectBody(req: ApiRequest): undefined {
    if (req.body && req.body.length > 0 && req.method !== 'GET') {
      const text = req.body.toString('utf8').trim();
      if (text !== '' && text !== '{}')
        throw ValidationError.field(['body'], 'This endpoint takes no request body', 'extra_forbidden');
    }
    return undefined;
  }

  private errorResponse(err: unknown, requestId: string, req: ApiRequest, spec?: RouteSpec): ApiResponse {
    const format = errorFormatFor(req.path, spec);
    // the caller gets 503 + Retry-After; the operator gets the cause, findable by the request id
    if (err instanceof StoreUnavailableError) {
      this.logger.error('store unavailable', {
        request_id: requestId,
        method: req.method,
        path: spec?.path ?? req.path,
        store: err.store,
        reason: err.reason,
        error: err.cause,
      });
    }
    if (err instanceof ApiError) return renderError(format, err, requestId);
    this.logger.error('unhandled error', { request_id: requestId, method: req.method, path: req.path, error: err });
    return renderError(format, undefined, requestId);
  }
}
