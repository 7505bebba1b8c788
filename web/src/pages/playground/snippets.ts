import { apiBase } from '../../api/client';

const pyLiteral = (json: string) =>
  json
    .replace(/\btrue\b/g, 'True')
    .replace(/\bfalse\b/g, 'False')
    .replace(/\bnull\b/g, 'None');

/** The same request as curl, Python and TypeScript; a streamed one reads the SSE lines as they come. */
export function snippets(path: string, body: object, stream = false) {
  const url = `${apiBase}${path}`;
  const json = JSON.stringify(body, null, 2);
  return {
    curl: `curl -s${stream ? 'N' : ''} ${url} \\\n  -H "X-API-Key: $SIFT_API_KEY" -H "Content-Type: application/json" \\\n  -d '${JSON.stringify(body).replace(/'/g, `'\\''`)}'`,
    Python: stream
      ? `import os, requests\n\nwith requests.post(\n    "${url}",\n    headers={"X-API-Key": os.environ["SIFT_API_KEY"]},\n    json=${pyLiteral(json)},\n    stream=True,\n) as res:\n    for line in res.iter_lines():\n        if line:\n            print(line.decode())`
      : `import os, requests\n\nres = requests.post(\n    "${url}",\n    headers={"X-API-Key": os.environ["SIFT_API_KEY"]},\n    json=${pyLiteral(json)},\n)\nprint(res.json())`,
    TypeScript:
      `const res = await fetch("${url}", {\n  method: "POST",\n  headers: { "X-API-Key": process.env.SIFT_API_KEY!, "Content-Type": "application/json" },\n  body: JSON.stringify(${json}),\n});\n` +
      (stream
        ? `for await (const chunk of res.body!.pipeThrough(new TextDecoderStream())) process.stdout.write(chunk);`
        : `console.log(await res.json());`),
  };
}
