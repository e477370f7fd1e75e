// DpResize: antialiased separable resampling of uint8 HWC images on the CPU, the scheme
// PIL's and torchvision's antialiased resize use: per axis, each output pixel is a
// normalised weighted sum of the input pixels within the filter's support, the support
// widened by the downscale factor; the horizontal pass first, rounded to uint8, then the
// vertical pass. Filters: 0 triangle (bilinear), 1 Keys cubic with a = -0.5 (bicubic).
//
// Inputs (per sample): 0 the uint8 HWC image or FHWC frames (any channel count); 1 int32
// or float32 (2,) output height, width (floats rounded to the nearest integer); optionally
// 2, 3 float32 (2,) roi_start, roi_end: the (y, x) corners of the region to resize, in
// input pixels with sub-pixel edges (fn.resize's roi_relative=False). Output: uint8, the
// same layout at the output height and width.
//
// Both passes run as a pass over rows (out row = weighted sum of input rows, one
// contiguous multiply-add per tap over the whole row, which the compiler vectorises); the
// horizontal pass runs on the transposed image. Scratch buffers are per thread and reused.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dp_op.h"
#include "resample.h"

namespace dali_pipes {

class DpResize : public DpOp {
 public:
  explicit DpResize(const ::dali::OpSpec &spec)
      : DpOp(spec), filter_(spec.GetArgument<int>("filter")),
        antialias_(spec.GetArgument<bool>("antialias")) {
    DALI_ENFORCE(filter_ == kTriangle || filter_ == kCubic,
                 ::dali::make_string("DpResize: filter must be 0 (triangle) or 1 (cubic), got ",
                                     filter_));
  }

 protected:
  bool SetupImpl(std::vector<::dali::OutputDesc> &output_desc,
                 const ::dali::Workspace &ws) override {
    const auto &images = Uint8Images(ws, "DpResize: input 0 (images) must be uint8 HWC or FHWC");
    const auto &sizes = ws.Input<CPU>(1);
    DALI_ENFORCE(sizes.type() == DALI_INT32 || sizes.type() == DALI_FLOAT,
                 "DpResize: input 1 (sizes) must be int32 or float32");
    DALI_ENFORCE(ws.NumInput() == 2 || ws.NumInput() == 4,
                 "DpResize: inputs are images, sizes and optionally roi_start, roi_end");
    int n = images.num_samples();
    for (int i = 1; i < ws.NumInput(); i++)
      DALI_ENFORCE(ws.Input<CPU>(i).num_samples() == n,
                   "DpResize: every input must have the batch's number of samples");
    int ndim = images.shape().sample_dim();
    DALI_ENFORCE(ndim == 3 || ndim == 4,
                 ::dali::make_string("DpResize: images must be HWC or FHWC, got ", ndim,
                                     " dimensions"));
    ::dali::TensorListShape<> out_shape(n, ndim);
    for (int s = 0; s < n; s++) {
      auto sh = images.shape().tensor_shape_span(s);
      for (int d = 0; d < ndim; d++)
        DALI_ENFORCE(sh[d] >= 1, ::dali::make_string("DpResize: sample ", s, " is empty: ",
                                                     images.shape()[s]));
      Plan p = MakePlan(ws, s, sh[ndim - 3], sh[ndim - 2]);
      auto out = images.shape()[s];
      out[ndim - 3] = p.oh;
      out[ndim - 2] = p.ow;
      out_shape.set_tensor_shape(s, out);
    }
    return Uint8Output(output_desc, out_shape);
  }

  void RunImpl(::dali::Workspace &ws) override {
    const auto &images = ws.Input<CPU>(0);
    auto &output = ws.Output<CPU>(0);
    int ndim = images.shape().sample_dim();
    // sample s: frames, height, width, channels
    auto dims = [&](int s) {
      auto sh = images.shape().tensor_shape_span(s);
      return std::array<int, 4>{ndim == 4 ? int(sh[0]) : 1, int(sh[ndim - 3]),
                                int(sh[ndim - 2]), int(sh[ndim - 1])};
    };
    auto cost = [&](int s) {
      auto [frames, h, w, c] = dims(s);
      Plan p = MakePlan(ws, s, h, w);
      return int64_t(frames) * (int64_t(h) * w + int64_t(p.oh) * p.ow) * c;
    };
    ForEachSample(ws, cost, [&](int s) {
      auto [frames, h, w, c] = dims(s);
      ResizeSample(images.tensor<uint8_t>(s), frames, h, w, c,
                   output.mutable_tensor<uint8_t>(s), MakePlan(ws, s, h, w), filter_,
                   antialias_);
    });
  }

 private:
  // Output size and region of interest of sample s, validated (errors name the sample).
  static Plan MakePlan(const ::dali::Workspace &ws, int s, int h, int w) {
    const auto &sizes = ws.Input<CPU>(1);
    DALI_ENFORCE(sizes.shape().tensor_size(s) == 2,
                 ::dali::make_string("DpResize: sample ", s, " needs a (2,) size, got ",
                                     sizes.shape()[s]));
    int hw[2];
    for (int k = 0; k < 2; k++) {
      if (sizes.type() == DALI_INT32) {
        hw[k] = sizes.tensor<int>(s)[k];
      } else {
        float v = sizes.tensor<float>(s)[k];
        hw[k] = std::isfinite(v) && std::fabs(v) < 1e6f ? int(std::lround(v)) : -1;
      }
    }
    DALI_ENFORCE(hw[0] >= 1 && hw[1] >= 1 && hw[0] <= 65536 && hw[1] <= 65536,
                 ::dali::make_string("DpResize: sample ", s, " output size ", hw[0], "x",
                                     hw[1], " is outside 1..65536"));
    Plan p{hw[0], hw[1], 0.0, 0.0, double(h), double(w)};
    if (ws.NumInput() == 4) {
      const auto &lo = ws.Input<CPU>(2), &hi = ws.Input<CPU>(3);
      DALI_ENFORCE(lo.type() == DALI_FLOAT && hi.type() == DALI_FLOAT &&
                   lo.shape().tensor_size(s) == 2 && hi.shape().tensor_size(s) == 2,
                   ::dali::make_string("DpResize: sample ", s, " needs float32 (2,) roi_start "
                                       "and roi_end"));
      const float *a = lo.tensor<float>(s), *b = hi.tensor<float>(s);
      p.y0 = a[0], p.x0 = a[1], p.y1 = b[0], p.x1 = b[1];
      DALI_ENFORCE(std::isfinite(p.y0) && std::isfinite(p.x0) && std::isfinite(p.y1) &&
                   std::isfinite(p.x1) && p.y1 > p.y0 && p.x1 > p.x0 && p.y1 > 0 &&
                   p.x1 > 0 && p.y0 < h && p.x0 < w,
                   ::dali::make_string("DpResize: sample ", s, " region of interest (", p.y0,
                                       ", ", p.x0, ") - (", p.y1, ", ", p.x1, ") is empty or "
                                       "outside its ", h, "x", w, " image"));
    }
    return p;
  }

  int filter_;
  bool antialias_;
};

}  // namespace dali_pipes

DP_REGISTER_OPERATOR(DpResize);

DALI_SCHEMA(DpResize)
    .DocStr("dali_pipes: antialiased separable resize of uint8 HWC / FHWC images (PIL's "
            "scheme), optionally of a region of interest with sub-pixel edges")
    .NumInput(2, 4)
    .NumOutput(1)
    .AddOptionalArg("filter", "0: triangle (bilinear), 1: cubic a = -0.5 (bicubic)", 0)
    .AddOptionalArg("antialias", "widen the filter by the downscale factor (area-weighted "
                    "shrinking, as PIL and torchvision's antialias=True); false: plain "
                    "interpolation at the sampling positions", true);
