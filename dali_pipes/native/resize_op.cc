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

namespace dali_pipes {

namespace {

enum Filter { kTriangle = 0, kCubic = 1 };

double FilterSupport(int filter) { return filter == kCubic ? 2.0 : 1.0; }

double FilterAt(int filter, double x) {
  x = std::fabs(x);
  if (filter == kTriangle) return x < 1.0 ? 1.0 - x : 0.0;
  const double a = -0.5;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

// Per output index: the first input index (counted from `lo`), the tap count and the
// normalised weights; [lo, hi) is the span of input indices any tap reads.
struct Taps {
  int ksize = 0, lo = 0, hi = 0;
  std::vector<int> first, count;
  std::vector<float> weights;  // [out * ksize + k]
};

// Taps of `out` pixels over the input span [lo_edge, hi_edge) (a region of interest with
// sub-pixel edges; the whole axis is [0, in)), clipped to the input's pixels.
void MakeTaps(int in, int out, int filter, bool antialias, double lo_edge, double hi_edge,
              Taps &t) {
  double scale = (hi_edge - lo_edge) / out;
  // antialiasing: widen the filter when shrinking; without it, plain interpolation
  double fscale = antialias ? std::max(scale, 1.0) : 1.0;
  double support = FilterSupport(filter) * fscale;
  t.ksize = int(std::ceil(support)) * 2 + 1;
  t.first.assign(out, 0);
  t.count.assign(out, 0);
  t.weights.assign(size_t(out) * t.ksize, 0.f);
  std::vector<double> w(t.ksize);
  for (int i = 0; i < out; i++) {
    double center = lo_edge + (i + 0.5) * scale;
    int lo = std::max(int(center - support + 0.5), 0);
    int hi = std::min(int(center + support + 0.5), in);
    int n = std::min(hi - lo, t.ksize);
    double total = 0.0;
    for (int k = 0; k < n; k++) {
      w[k] = FilterAt(filter, (k + lo - center + 0.5) / fscale);
      total += w[k];
    }
    if (n <= 0 || total == 0.0) {  // cannot happen for in, out >= 1; kept safe
      lo = std::min(std::max(int(center), 0), in - 1);
      n = 1;
      w[0] = total = 1.0;
    }
    t.first[i] = lo;
    t.count[i] = n;
    for (int k = 0; k < n; k++) t.weights[size_t(i) * t.ksize + k] = float(w[k] / total);
  }
  // the span read (taps need not be monotonic at clipped edges), then firsts relative to it
  t.lo = *std::min_element(t.first.begin(), t.first.end());
  t.hi = 0;
  for (int i = 0; i < out; i++) t.hi = std::max(t.hi, t.first[i] + t.count[i]);
  for (int &f : t.first) f -= t.lo;
}

// Round half up and saturate: v + 0.5 clamped to [0, 255.5) truncates to floor(v + 0.5).
inline uint8_t RoundSat(float v) {
  return static_cast<uint8_t>(static_cast<int>(std::min(std::max(v + 0.5f, 0.f), 255.f)));
}

// out row r (of `rowlen` bytes) = sum_k w[r, k] * in row first[r] + k.
void ResampleRows(const uint8_t *in, int64_t rowlen, uint8_t *out, int out_rows,
                  const Taps &t, std::vector<float> &acc) {
  acc.resize(rowlen);
  float *__restrict a = acc.data();
  for (int r = 0; r < out_rows; r++) {
    const float *w = t.weights.data() + size_t(r) * t.ksize;
    const uint8_t *__restrict src = in + int64_t(t.first[r]) * rowlen;
    int n = t.count[r], k = 0;
    if (n >= 2) {  // two taps per pass over the accumulator
      const uint8_t *__restrict s1 = src + rowlen;
      float w0 = w[0], w1 = w[1];
      for (int64_t i = 0; i < rowlen; i++) a[i] = w0 * float(src[i]) + w1 * float(s1[i]);
      k = 2;
    } else {
      float w0 = w[0];
      for (int64_t i = 0; i < rowlen; i++) a[i] = w0 * float(src[i]);
      k = 1;
    }
    for (; k + 1 < n; k += 2) {
      const uint8_t *__restrict s0 = src + int64_t(k) * rowlen;
      const uint8_t *__restrict s1 = s0 + rowlen;
      float w0 = w[k], w1 = w[k + 1];
      for (int64_t i = 0; i < rowlen; i++) a[i] += w0 * float(s0[i]) + w1 * float(s1[i]);
    }
    if (k < n) {
      const uint8_t *__restrict s0 = src + int64_t(k) * rowlen;
      float w0 = w[k];
      for (int64_t i = 0; i < rowlen; i++) a[i] += w0 * float(s0[i]);
    }
    uint8_t *__restrict dst = out + int64_t(r) * rowlen;
    for (int64_t i = 0; i < rowlen; i++) dst[i] = RoundSat(a[i]);
  }
}

// (h, w, c) with rows `stride` bytes apart -> (w, h, c) contiguous, in tiles that stay in
// cache.
void Transpose(const uint8_t *in, int h, int w, int c, int64_t stride, uint8_t *out) {
  const int tile = 32;
  for (int y0 = 0; y0 < h; y0 += tile) {
    int y1 = std::min(h, y0 + tile);
    for (int x0 = 0; x0 < w; x0 += tile) {
      int x1 = std::min(w, x0 + tile);
      for (int y = y0; y < y1; y++) {
        const uint8_t *src = in + int64_t(y) * stride + int64_t(x0) * c;
        if (c == 3) {
          for (int x = x0; x < x1; x++, src += 3) {
            uint8_t *d = out + (int64_t(x) * h + y) * 3;
            d[0] = src[0]; d[1] = src[1]; d[2] = src[2];
          }
        } else {
          for (int x = x0; x < x1; x++, src += c)
            std::memcpy(out + (int64_t(x) * h + y) * c, src, c);
        }
      }
    }
  }
}

struct Scratch {
  std::vector<uint8_t> a, b;
  std::vector<float> acc;
  Taps across, down;  // horizontal, vertical
};

// The input window one sample needs: output size, region of interest (y0, x0, y1, x1).
struct Plan {
  int oh, ow;
  double y0, x0, y1, x1;
};

bool Identity(int in, int out, double lo, double hi) { return in == out && lo == 0 && hi == in; }

// One frame (h, w, c) -> (oh, ow, c), taps made for this sample. The horizontal pass runs
// only over the rows the vertical taps read and the columns its own taps read.
void ResizeFrame(const uint8_t *in, int h, int w, int c, uint8_t *out, const Plan &p,
                 Scratch &s, bool across, bool down) {
  if (!across && !down) {
    std::memcpy(out, in, size_t(h) * w * c);
    return;
  }
  int r0 = down ? s.down.lo : 0, rows = (down ? s.down.hi : h) - r0;
  const uint8_t *band = in + int64_t(r0) * w * c;  // the input rows the taps read
  int64_t band_row = int64_t(w) * c;
  if (across) {
    int c0 = s.across.lo, cols = s.across.hi - c0;
    // (rows, cols) block, transposed: (cols, rows, c)
    s.a.resize(size_t(cols) * rows * c);
    Transpose(band + int64_t(c0) * c, rows, cols, c, band_row, s.a.data());
    s.b.resize(size_t(p.ow) * rows * c);
    ResampleRows(s.a.data(), int64_t(rows) * c, s.b.data(), p.ow, s.across, s.acc);
    if (!down) {
      Transpose(s.b.data(), p.ow, rows, c, int64_t(rows) * c, out);
      return;
    }
    s.a.resize(size_t(rows) * p.ow * c);
    Transpose(s.b.data(), p.ow, rows, c, int64_t(rows) * c, s.a.data());
    band = s.a.data();
    band_row = int64_t(p.ow) * c;
  }
  ResampleRows(band, band_row, out, p.oh, s.down, s.acc);
}

// A sample: a frame (HWC) or frames (FHWC), all with the same taps.
void ResizeSample(const uint8_t *in, int frames, int h, int w, int c, uint8_t *out,
                  const Plan &p, int filter, bool antialias) {
  thread_local Scratch s;
  bool across = !Identity(w, p.ow, p.x0, p.x1), down = !Identity(h, p.oh, p.y0, p.y1);
  if (across) MakeTaps(w, p.ow, filter, antialias, p.x0, p.x1, s.across);
  if (down) MakeTaps(h, p.oh, filter, antialias, p.y0, p.y1, s.down);
  for (int f = 0; f < frames; f++)
    ResizeFrame(in + int64_t(f) * h * w * c, h, w, c, out + int64_t(f) * p.oh * p.ow * c, p,
                s, across, down);
}

}  // namespace

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
    const auto &images = ws.Input<CPU>(0);
    const auto &sizes = ws.Input<CPU>(1);
    DALI_ENFORCE(images.type() == DALI_UINT8,
                 "DpResize: input 0 (images) must be uint8 HWC or FHWC");
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
