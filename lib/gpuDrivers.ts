/**
 * Which CUDA build an image may carry, given the NVIDIA driver of the hosts that run it.
 *
 * NVIDIA, "Minor Version Compatibility" (table "CUDA Toolkit 11.x, 12.x, and 13.x Driver Version
 * Ranges"): an application built with any toolkit of a CUDA major release runs on a driver at or
 * above that major's minimum — 11.x ≥ 450, 12.x ≥ 525, 13.x ≥ 580.
 * https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html
 */
const MIN_DRIVER_BY_CUDA_MAJOR: Readonly<Record<number, number>> = { 11: 450, 12: 525, 13: 580 };

/**
 * The NVIDIA driver SageMaker documents for its GPU hosts. SageMaker publishes host drivers per
 * machine image: 535 (CUDA 12.2; ml.g4dn/g5/g6/p4d/p5, images al2-ami-sagemaker-inference-gpu-2 and
 * al2-ami-sagemaker-batch-gpu-535) and 550 (CUDA 12.4; ml.p5e/p5en); older defaults run 470.
 * It names no newer driver, and none for training hosts specifically, so the training image must
 * run on 535 — the driver of the documented images that cover ml.g5 and ml.g6 (lib/config.ts).
 * https://docs.aws.amazon.com/sagemaker/latest/dg/inference-gpu-drivers.html
 * https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ProductionVariant.html (InferenceAmiVersion)
 */
export const SAGEMAKER_GPU_HOST_DRIVER = 535;

/** The lowest driver a CUDA `major.minor` build runs on; throws for a major NVIDIA's table lacks. */
export function minimumDriverFor(cudaVersion: string): number {
  const major = Number(/^(\d+)\.\d+$/.exec(cudaVersion)?.[1]);
  const driver = MIN_DRIVER_BY_CUDA_MAJOR[major];
  if (driver === undefined)
    throw new Error(
      `no driver rule for CUDA ${cudaVersion} (known majors: ${Object.keys(MIN_DRIVER_BY_CUDA_MAJOR).join(', ')})`,
    );
  return driver;
}

export function cudaRunsOnDriver(cudaVersion: string, driver: number): boolean {
  return driver >= minimumDriverFor(cudaVersion);
}

/** PyTorch names its CUDA wheel builds `cu` + major + minor digit (cu126 = CUDA 12.6, cu132 = 13.2). */
export function cudaOfTorchTag(tag: string): string {
  const m = /^cu(\d+)(\d)$/.exec(tag);
  if (!m) throw new Error(`not a PyTorch CUDA tag: ${tag}`);
  return `${m[1]}.${m[2]}`;
}
