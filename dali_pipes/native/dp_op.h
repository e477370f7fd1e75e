// dp_op.h: what the dali_pipes CPU operators (resize_op.cc, policy_op.cc,
// photometric_op.cc) share: a base class for an operator with one uint8 output laid out
// like its input 0 and computed per sample on DALI's thread pool, and the registration.
// Its contents are part of the build cache key (dali_pipes/native/builder.py), so editing
// it rebuilds every operator.
#ifndef DALI_PIPES_NATIVE_DP_OP_H_
#define DALI_PIPES_NATIVE_DP_OP_H_

#include <cstdint>
#include <vector>

#include "dali/pipeline/operator/operator.h"

namespace dali_pipes {

using CPU = ::dali::CPUBackend;

// Subclasses validate their inputs in SetupImpl and end it with `return Uint8Output(...)`;
// RunImpl calls ForEachSample.
class DpOp : public ::dali::Operator<CPU> {
 public:
  explicit DpOp(const ::dali::OpSpec &spec) : ::dali::Operator<CPU>(spec) {}

 protected:
  // Declares the one output: uint8 of `shape`.
  static bool Uint8Output(std::vector<::dali::OutputDesc> &output_desc,
                          const ::dali::TensorListShape<> &shape) {
    output_desc.resize(1);
    output_desc[0].type = DALI_UINT8;
    output_desc[0].shape = shape;
    return true;
  }

  // Input 0, which must be uint8 images (`message` says so otherwise; not named `error`,
  // which DALI_ENFORCE declares).
  static const ::dali::TensorList<CPU> &Uint8Images(const ::dali::Workspace &ws,
                                                    const char *message) {
    const auto &images = ws.Input<CPU>(0);
    DALI_ENFORCE(images.type() == DALI_UINT8, message);
    return images;
  }

  // ForEachSample scheduled by the size of each sample of input 0; work(s, its shape).
  template <typename Work>
  static void ForEachImage(::dali::Workspace &ws, const Work &work) {
    const auto &shape = ws.Input<CPU>(0).shape();
    ForEachSample(ws, [&](int s) { return shape.tensor_size(s); },
                  [&](int s) { work(s, shape.tensor_shape_span(s)); });
  }

  // Gives output 0 input 0's layout, then runs work(s) for every sample s on DALI's thread
  // pool, scheduled by cost(s) (an int64_t, largest first); returns when all are done.
  template <typename Cost, typename Work>
  static void ForEachSample(::dali::Workspace &ws, const Cost &cost, const Work &work) {
    const auto &input = ws.Input<CPU>(0);
    ws.Output<CPU>(0).SetLayout(input.GetLayout());
    auto &tp = ws.GetThreadPool();
    for (int s = 0; s < input.num_samples(); s++)
      tp.AddWork([&work, s](int) { work(s); }, cost(s));
    tp.RunAll();
  }
};

}  // namespace dali_pipes

// Registers ::dali_pipes::Name as the CPU operator Name (its DALI_SCHEMA follows on
// another line: both name variables after __LINE__).
#define DP_REGISTER_OPERATOR(Name) \
  DALI_REGISTER_OPERATOR(Name, ::dali_pipes::Name, ::dali::CPU)

#endif  // DALI_PIPES_NATIVE_DP_OP_H_
