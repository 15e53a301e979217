#pragma once
// Anonymous host memory for the large buffers that decoding and training stream through: weights
// (arenas, 16-bit copies) and the KV cache. Pages read as zero and cost nothing until written.
// Mappings of 2 MiB or more are 2 MiB aligned and their whole 2 MiB blocks advised
// MADV_HUGEPAGE, so that a machine whose transparent huge pages are in "madvise" mode (the
// default on Debian) backs them with 2 MiB pages: streaming 170 MB of bf16 weights per token ran at 14-16 GB/s on 4 KiB pages and 16-19
// GB/s on 2 MiB pages (2-core EPYC, one thread, alternating runs; bench/results/decode.md).
#include <cstddef>

namespace hw {

// nullptr when the kernel refuses the mapping.
void* map_host_pages(size_t bytes);
// bytes: the size given to map_host_pages.
void unmap_host_pages(void* p, size_t bytes);

// Advises the whole 2 MiB blocks inside [p, p + bytes) MADV_HUGEPAGE: for a std::vector's
// storage (the KV cache), between reserve() and the first write (a page already touched stays
// 4 KiB). Buffers that must be huge-page backed whole (a model's 16-bit matrices) take one
// mapping instead (cpu::make_half_storage).
void advise_huge_pages(void* p, size_t bytes);

}  // namespace hw
