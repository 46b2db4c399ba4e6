// The buffers a kernel writes: every copy, fill, gemm, reduction, cumsum
// and atomic destination and every element store, at any depth. The launch
// metadata lists the tensor parameters among them (`writes`), so clients
// know which arguments a launch changes (torch's mutation annotations,
// CUDA-graph and stream bookkeeping) without reading the IR.
#ifndef KILN_COMPILER_IR_WRITTEN_BUFFERS_H_
#define KILN_COMPILER_IR_WRITTEN_BUFFERS_H_

#include <set>
#include <string>
#include <vector>

#include "compiler/ir/ir.h"

namespace kiln::compiler {

// Adds to `out` the name of every buffer `b` writes.
void AddWrittenBuffers(const Block& b, std::set<std::string>* out);

// The tensor parameters of `k` its body writes, in parameter order.
std::vector<std::string> WrittenTensorParams(const Kernel& k);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_WRITTEN_BUFFERS_H_
