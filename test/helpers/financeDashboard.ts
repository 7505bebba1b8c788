/** Reads the finance dashboard the way CloudWatch will: which metric + dimension sets its queries ask for. */
import type { Template } from 'aws-cdk-lib/assertions';

/** The synthesized dashboard body, with CloudFormation tokens flattened to placeholders. */
export function dashboardBody(t: Template, logicalIdPrefix: string): string {
  const dashboards = t.findResources('AWS::CloudWatch::Dashboard');
  const found = Object.entries(dashboards).find(([id]) => id.startsWith(logicalIdPrefix));
  if (!found) throw new Error(`no dashboard ${logicalIdPrefix}*`);
  const body = found[1].Properties.DashboardBody as string | { 'Fn::Join': [string, unknown[]] };
  return typeof body === 'string'
    ? body
    : body['Fn::Join'][1].map((p) => (typeof p === 'string' ? p : '<token>')).join('');
}

export interface MetricQuery {
  namespace: string;
  metric: string;
  /** Dimension names, sorted: CloudWatch SCHEMA() and SEARCH schemas match the exact set. */
  dimensions: string[];
}

/** Every metric a Metrics Insights `SELECT … FROM SCHEMA(…)` or a `SEARCH('{…} MetricName="…"')` reads. */
export function dashboardQueries(body: string): MetricQuery[] {
  const widgets = (JSON.parse(body) as { widgets: Array<{ properties: { metrics?: unknown[][] } }> }).widgets;
  const expressions = widgets
    .flatMap((w) => w.properties.metrics ?? [])
    .flat()
    .flatMap((m) =>
      typeof m === 'object' && m !== null && 'expression' in m
        ? [String((m as { expression: string }).expression)]
        : [],
    );
  const out: MetricQuery[] = [];
  for (const e of expressions) {
    for (const m of e.matchAll(/SELECT \w+\((\w+)\) FROM SCHEMA\("([^"]+)",\s*([^)]*)\)/g)) {
      out.push({
        metric: m[1]!,
        namespace: m[2]!,
        dimensions: m[3]!
          .split(',')
          .map((d) => d.trim())
          .sort(),
      });
    }
    for (const m of e.matchAll(/SEARCH\('\{([^}]*)\} MetricName="(\w+)"/g)) {
      const [namespace, ...dims] = m[1]!.split(',').map((d) => d.trim());
      out.push({ metric: m[2]!, namespace: namespace!, dimensions: dims.sort() });
    }
  }
  return out;
}

/** The metric + dimension sets an EMF line declares (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html). */
export function emfMetrics(line: string): MetricQuery[] {
  const doc = JSON.parse(line) as {
    _aws?: {
      CloudWatchMetrics: Array<{ Namespace: string; Dimensions: string[][]; Metrics: Array<{ Name: string }> }>;
    };
  } & Record<string, unknown>;
  if (!doc._aws) return [];
  return doc._aws.CloudWatchMetrics.flatMap((d) =>
    d.Metrics.flatMap((m) =>
      // a metric is only extracted with a value, and each dimension must have one on the line
      typeof doc[m.Name] === 'number' && d.Dimensions.every((set) => set.every((k) => typeof doc[k] === 'string'))
        ? d.Dimensions.map((set) => ({ namespace: d.Namespace, metric: m.Name, dimensions: [...set].sort() }))
        : [],
    ),
  );
}
