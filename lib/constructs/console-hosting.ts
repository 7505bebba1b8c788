import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { CfnOutput, Duration, Fn, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as cloudfront from 'aws-cdk-lib/aws-cloudfront';
import * as origins from 'aws-cdk-lib/aws-cloudfront-origins';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as s3deploy from 'aws-cdk-lib/aws-s3-deployment';
import { Construct } from 'constructs';
import type { StageConfig } from '../config';
import { acknowledge } from '../nag';
import { REPO_ROOT } from '../paths';

export interface ConsoleHostingProps {
  readonly config: StageConfig;
  /** The API's base URL; written to the console's config.json (the app reads it at start). */
  readonly apiUrl: string;
  /** The built console (`vite build` in web/, run by scripts/setup.mjs). */
  readonly distDir?: string;
}

/** Where `vite build` writes the console; gitignored, so a fresh clone has none. */
export const CONSOLE_DIST = join(REPO_ROOT, 'web', 'dist');

/** The command that builds the console for deploy (web/ has its own dependencies; `npm ci` at the root skips them). */
export const CONSOLE_BUILD_COMMAND = 'npm --prefix web ci && npm --prefix web run build';

export function consoleBuilt(distDir: string = CONSOLE_DIST): boolean {
  return existsSync(join(distDir, 'index.html'));
}

/**
 * The web console on AWS: its built assets in a private bucket behind CloudFront (origin access
 * control), with a CSP that lets the page call only the API and the presigned S3 uploads. The
 * distribution's URL is an output; add it to `consoleOrigins` so the API's CORS and the data
 * bucket's CORS accept the console (README "Console").
 */
export class ConsoleHosting extends Construct {
  readonly distribution: cloudfront.Distribution;
  readonly url: string;

  constructor(scope: Construct, id: string, props: ConsoleHostingProps) {
    super(scope, id);
    const distDir = props.distDir ?? CONSOLE_DIST;
    if (!consoleBuilt(distDir)) {
      throw new Error(`The console is not built (${distDir}/index.html is missing): run \`${CONSOLE_BUILD_COMMAND}\``);
    }
    const removalPolicy = props.config.retainData ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;
    // CloudFormation deletes only empty buckets (lib/data-stack.ts)
    const autoDeleteObjects = !props.config.retainData;

    // S3 server access logs and CloudFront standard logs: CloudFront needs ACLs on its log bucket.
    const logs = new s3.Bucket(this, 'Logs', {
      encryption: s3.BucketEncryption.S3_MANAGED,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
      removalPolicy,
      autoDeleteObjects,
      lifecycleRules: [{ id: 'expire-logs', expiration: Duration.days(90) }],
    });

    const site = new s3.Bucket(this, 'Assets', {
      encryption: s3.BucketEncryption.S3_MANAGED,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      serverAccessLogsBucket: logs,
      serverAccessLogsPrefix: 'assets/',
      removalPolicy,
      autoDeleteObjects,
    });

    const apiOrigin = Fn.select(0, Fn.split('/', Fn.select(1, Fn.split('://', props.apiUrl)), 1));
    const region = Stack.of(this).region;
    const csp = [
      "default-src 'self'",
      "script-src 'self'",
      // Mantine sets CSS variables in style attributes
      "style-src 'self' 'unsafe-inline'",
      "img-src 'self' data:",
      // the API, and the presigned dataset uploads to the data bucket
      `connect-src 'self' https://${apiOrigin} https://*.s3.${region}.amazonaws.com https://*.s3.amazonaws.com`,
      "frame-ancestors 'none'",
      "base-uri 'none'",
      "form-action 'self'",
    ].join('; ');
    const headers = new cloudfront.ResponseHeadersPolicy(this, 'SecurityHeaders', {
      comment: `Sift ${props.config.stage} console: CSP and security headers`,
      securityHeadersBehavior: {
        contentSecurityPolicy: { contentSecurityPolicy: csp, override: true },
        contentTypeOptions: { override: true },
        frameOptions: { frameOption: cloudfront.HeadersFrameOption.DENY, override: true },
        referrerPolicy: { referrerPolicy: cloudfront.HeadersReferrerPolicy.NO_REFERRER, override: true },
        strictTransportSecurity: { accessControlMaxAge: Duration.days(365), includeSubdomains: true, override: true },
      },
    });

    this.distribution = new cloudfront.Distribution(this, 'Distribution', {
      comment: `Sift ${props.config.stage} console`,
      defaultRootObject: 'index.html',
      defaultBehavior: {
        origin: origins.S3BucketOrigin.withOriginAccessControl(site),
        viewerProtocolPolicy: cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
        responseHeadersPolicy: headers,
        cachePolicy: cloudfront.CachePolicy.CACHING_OPTIMIZED,
      },
      enableLogging: true,
      logBucket: logs,
      logFilePrefix: 'cloudfront/',
    });
    acknowledge(
      this.distribution,
      {
        id: 'AwsSolutions-CFR1',
        reason:
          'The console is static JavaScript and CSS for every region the API serves; the API enforces access with keys',
      },
      {
        id: 'AwsSolutions-CFR2',
        reason:
          'Static assets only: the API behind it has its own WAF web ACL (ApiStack), which is where requests are filtered',
      },
      {
        id: 'AwsSolutions-CFR4',
        reason:
          'The default *.cloudfront.net certificate cannot pin TLS 1.2; a custom domain with its own certificate would',
      },
    );

    const deployment = new s3deploy.BucketDeployment(this, 'Deploy', {
      destinationBucket: site,
      sources: [s3deploy.Source.asset(distDir), s3deploy.Source.jsonData('config.json', { apiUrl: props.apiUrl })],
      distribution: this.distribution,
      distributionPaths: ['/index.html', '/config.json'],
      memoryLimit: 256,
    });
    acknowledge(deployment.handlerRole, {
      id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
      reason: 'CDK’s BucketDeployment handler uses AWSLambdaBasicExecutionRole only to write its own CloudWatch logs',
    });
    const copyReason =
      'CDK’s BucketDeployment handler copies the asset zip into the console bucket and prunes old files: CDK grants these wildcards';
    for (const finding of [
      'Action::s3:GetBucket*',
      'Action::s3:GetObject*',
      'Action::s3:List*',
      'Resource::arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>/*',
      'Action::s3:Abort*',
      'Action::s3:DeleteObject*',
      `Resource::<${Stack.of(this).getLogicalId(site.node.defaultChild as s3.CfnBucket)}.Arn>/*`,
      'Resource::*',
    ]) {
      acknowledge(deployment.handlerRole, { id: `AwsSolutions-IAM5[${finding}]`, reason: copyReason });
    }
    const handler = deployment.handlerRole.node.scope;
    if (handler)
      acknowledge(handler, {
        id: 'AwsSolutions-L1',
        reason: 'CDK’s BucketDeployment singleton pins its own Python runtime; upgrading it is CDK’s, not ours',
      });

    this.url = `https://${this.distribution.distributionDomainName}`;
    new CfnOutput(this, 'ConsoleUrl', {
      value: this.url,
      description: 'The web console; add it to consoleOrigins (cdk.json) for CORS',
    });
  }
}

/**
 * The console in a stack of its own: CDK's BucketDeployment brings a Python Lambda and a
 * CloudFront invalidation grant that the Api stack's rules (Node.js Lambdas only, no wildcard
 * resources outside logs/X-Ray) rightly refuse.
 */
export class ConsoleStack extends Stack {
  readonly hosting: ConsoleHosting;
  constructor(scope: Construct, id: string, props: StackProps & Omit<ConsoleHostingProps, 'distDir'>) {
    super(scope, id, props);
    this.hosting = new ConsoleHosting(this, 'Console', { config: props.config, apiUrl: props.apiUrl });
  }
}
