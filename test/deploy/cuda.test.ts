/**
 * The training image's torch build must run on the NVIDIA driver SageMaker documents for its GPU
 * hosts (rule and doc pages: lib/gpuDrivers.ts). The image's Dockerfile is read, not trusted:
 * torch must come from an explicit PyTorch CUDA index at the version requirements.txt pins.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cudaOfTorchTag, cudaRunsOnDriver, minimumDriverFor, SAGEMAKER_GPU_HOST_DRIVER } from '../../lib/gpuDrivers';
import { IMAGES } from '../../lib/images';
import { parseDockerfile } from './dockerfile';

const TRAINING = IMAGES.training.directory;

/** How the Dockerfile installs torch: `{ tag: 'cu126', version: '2.15.0' }`, or null when from PyPI. */
function torchBuildOf(dockerfile: string): { tag: string; version: string } | null {
  for (const { keyword, args } of parseDockerfile(dockerfile)) {
    if (keyword !== 'RUN') continue;
    for (const step of args.split('&&')) {
      const pin = /\btorch==([\w.]+)(?:\+(cu\d+))?/.exec(step);
      if (!/\bpip3? install\b/.test(step) || !pin) continue;
      const index = /--(?:extra-)?index-url[= ]https:\/\/download\.pytorch\.org\/whl\/(cu\d+)\b/.exec(step);
      if (!index) return null;
      if (pin[2] !== index[1])
        throw new Error(`torch==${pin[1]}${pin[2] ? `+${pin[2]}` : ''} does not name the index's build ${index[1]}`);
      return { tag: index[1]!, version: pin[1]! };
    }
  }
  return null;
}

describe('the driver rule (NVIDIA minor version compatibility)', () => {
  it('gives each CUDA major its minimum driver', () => {
    expect([minimumDriverFor('11.8'), minimumDriverFor('12.6'), minimumDriverFor('13.2')]).toEqual([450, 525, 580]);
    expect(() => minimumDriverFor('14.0')).toThrow('no driver rule for CUDA 14.0');
  });

  it('accepts CUDA 12 and refuses CUDA 13 on the 535 driver', () => {
    expect(cudaRunsOnDriver('12.6', 535)).toBe(true);
    expect(cudaRunsOnDriver('13.2', 535)).toBe(false);
    expect(cudaRunsOnDriver('13.0', 580)).toBe(true);
    expect(cudaRunsOnDriver('12.8', 470)).toBe(false);
  });

  it("reads PyTorch's wheel tags", () => {
    expect([cudaOfTorchTag('cu126'), cudaOfTorchTag('cu132'), cudaOfTorchTag('cu118')]).toEqual([
      '12.6',
      '13.2',
      '11.8',
    ]);
    expect(() => cudaOfTorchTag('cpu')).toThrow('not a PyTorch CUDA tag');
  });
});

describe('the training image', () => {
  const dockerfile = readFileSync(join(TRAINING, IMAGES.training.file), 'utf8');
  const requirements = readFileSync(join(TRAINING, 'requirements.txt'), 'utf8');

  it('installs torch from an explicit PyTorch CUDA index that runs on SageMaker’s documented driver', () => {
    const build = torchBuildOf(dockerfile);
    // PyPI's linux/x86_64 torch wheel carries the newest CUDA (13.x for torch 2.15): it needs driver >= 580
    expect(build).not.toBeNull();
    const cuda = cudaOfTorchTag(build!.tag);
    expect({
      cuda,
      minimumDriver: minimumDriverFor(cuda),
      runs: cudaRunsOnDriver(cuda, SAGEMAKER_GPU_HOST_DRIVER),
    }).toEqual({
      cuda,
      minimumDriver: minimumDriverFor(cuda),
      runs: true,
    });
  });

  it('installs the torch version requirements.txt pins (what the trainer is tested with)', () => {
    const pinned = /^torch==([\w.]+)$/m.exec(requirements)?.[1];
    expect(pinned).toBeDefined();
    expect(torchBuildOf(dockerfile)?.version).toBe(pinned);
  });
});
