/**
 * A one-node ONNX model (y = Identity(x), float[2]) written as protobuf bytes, so session tests
 * need no built model. Field numbers from onnx.proto (ModelProto, GraphProto, NodeProto,
 * ValueInfoProto, TypeProto.Tensor, TensorShapeProto).
 */
const varint = (n: number): number[] => {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
};
const num = (field: number, n: number) => [...varint((field << 3) | 0), ...varint(n)];
const bytes = (field: number, b: number[]) => [...varint((field << 3) | 2), ...varint(b.length), ...b];
const str = (field: number, s: string) => bytes(field, [...Buffer.from(s, 'utf8')]);

const FLOAT = 1;
const valueInfo = (name: string, dim: number) => [
  ...str(1, name),
  ...bytes(2, bytes(1, [...num(1, FLOAT), ...bytes(2, bytes(1, num(1, dim)))])),
];

export function identityModel(dim = 2): Uint8Array {
  const node = [...str(1, 'x'), ...str(2, 'y'), ...str(4, 'Identity')];
  const graph = [
    ...bytes(1, node),
    ...str(2, 'identity'),
    ...bytes(11, valueInfo('x', dim)),
    ...bytes(12, valueInfo('y', dim)),
  ];
  const model = [...num(1, 8), ...bytes(7, graph), ...bytes(8, num(2, 13))];
  return Uint8Array.from(model);
}
