#pragma once
// The machine's read bandwidth as a decode step sees it: the fastest of five sums of a 512 MiB
// float buffer over the current OpenMP threads, in GB/s. bench-infer prints it beside the GB/s a
// decode step streams (weights + KV), so the two figures come from the same run and threads.
namespace hw::infer {

double read_bandwidth_gbps();

}  // namespace hw::infer
