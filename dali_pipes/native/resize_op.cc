// DpResize: antialiased separable resampling of uint8 HWC images on the CPU, the scheme
// PIL's and torchvision's antialiased resize use: per axis, each output pixel is a
// normalised weighted sum of the input pixels within the filter's support, the support
// widened by the downscale factor; the horizontal pass first, rounded to uint8, then the
// vertical pass. Filters: 0 triangle (bilinear), 1 Keys cubic with a = -0.5 (bicubic).
//
// Inputs (per sample): 0 the uint8 HWC image (any channel count); 1 int32 or float32 (2,)
// output height, width (floats rounded to the nearest integer). Output: uint8 (height,
// width, channels).
//
// Both passes run as a pass over rows (out row = weighted sum of input rows, one
// contiguous multiply-add per tap over the whole row, which the compiler vectorises); the
// horizontal pass runs on the transposed image. Scratch buffers are per thread and reused.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dali/pipeline/operator/operator.h"

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

// Per output index: the first input index, the tap count and the normalised weights.
struct Taps {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<float> weights;  // [out * ksize + k]
};

void MakeTaps(int in, int out, int filter, Taps &t) {
  double scale = double(in) / out;
  double fscale = std::max(scale, 1.0);  // antialiasing: widen the filter when shrinking
  double support = FilterSupport(filter) * fscale;
  t.ksize = int(std::ceil(support)) * 2 + 1;
  t.first.assign(out, 0);
  t.count.assign(out, 0);
  t.weights.assign(size_t(out) * t.ksize, 0.f);
  std::vector<double> w(t.ksize);
  for (int i = 0; i < out; i++) {
    double center = (i + 0.5) * scale;
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

// (h, w, c) -> (w, h, c), in tiles that stay in cache.
void Transpose(const uint8_t *in, int h, int w, int c, uint8_t *out) {
  const int tile = 32;
  for (int y0 = 0; y0 < h; y0 += tile) {
    int y1 = std::min(h, y0 + tile);
    for (int x0 = 0; x0 < w; x0 += tile) {
      int x1 = std::min(w, x0 + tile);
      for (int y = y0; y < y1; y++) {
        const uint8_t *src = in + (int64_t(y) * w + x0) * c;
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
  Taps taps;
};

void Resize(const uint8_t *in, int h, int w, int c, uint8_t *out, int oh, int ow,
            int filter) {
  thread_local Scratch s;
  if (ow == w && oh == h) {
    std::memcpy(out, in, size_t(h) * w * c);
    return;
  }
  const uint8_t *src = in;
  if (ow != w) {  // horizontal pass, on the transposed image: (w, h, c) -> (ow, h, c)
    s.a.resize(size_t(h) * w * c);
    Transpose(in, h, w, c, s.a.data());
    MakeTaps(w, ow, filter, s.taps);
    s.b.resize(size_t(ow) * h * c);
    ResampleRows(s.a.data(), int64_t(h) * c, s.b.data(), ow, s.taps, s.acc);
    if (oh == h) {
      Transpose(s.b.data(), ow, h, c, out);
      return;
    }
    s.a.resize(size_t(h) * ow * c);
    Transpose(s.b.data(), ow, h, c, s.a.data());
    src = s.a.data();
  }
  // vertical pass: (h, ow, c) -> (oh, ow, c)
  MakeTaps(h, oh, filter, s.taps);
  ResampleRows(src, int64_t(ow) * c, out, oh, s.taps, s.acc);
}

}  // namespace

class DpResize : public ::dali::Operator<::dali::CPUBackend> {
 public:
  explicit DpResize(const ::dali::OpSpec &spec)
      : ::dali::Operator<::dali::CPUBackend>(spec), filter_(spec.GetArgument<int>("filter")) {
    DALI_ENFORCE(filter_ == kTriangle || filter_ == kCubic,
                 ::dali::make_string("DpResize: filter must be 0 (triangle) or 1 (cubic), got ",
                                     filter_));
  }

 protected:
  bool SetupImpl(std::vector<::dali::OutputDesc> &output_desc,
                 const ::dali::Workspace &ws) override {
    const auto &images = ws.Input<::dali::CPUBackend>(0);
    const auto &sizes = ws.Input<::dali::CPUBackend>(1);
    DALI_ENFORCE(images.type() == DALI_UINT8, "DpResize: input 0 (images) must be uint8 HWC");
    DALI_ENFORCE(sizes.type() == DALI_INT32 || sizes.type() == DALI_FLOAT,
                 "DpResize: input 1 (sizes) must be int32 or float32");
    int n = images.num_samples();
    DALI_ENFORCE(sizes.num_samples() == n,
                 "DpResize: images and sizes must have the same number of samples");
    ::dali::TensorListShape<3> out_shape(n);
    for (int s = 0; s < n; s++) {
      auto sh = images.shape().tensor_shape_span(s);
      DALI_ENFORCE(sh.size() == 3 && sh[0] >= 1 && sh[1] >= 1 && sh[2] >= 1,
                   ::dali::make_string("DpResize: sample ", s, " must be a non-empty HWC "
                                       "image, got shape ", images.shape()[s]));
      DALI_ENFORCE(sizes.shape().tensor_size(s) == 2,
                   ::dali::make_string("DpResize: sample ", s, " needs a (2,) size, got ",
                                       sizes.shape()[s]));
      int hw[2];
      OutSize(sizes, s, hw);
      DALI_ENFORCE(hw[0] >= 1 && hw[1] >= 1 && hw[0] <= 65536 && hw[1] <= 65536,
                   ::dali::make_string("DpResize: sample ", s, " output size ", hw[0], "x",
                                       hw[1], " is outside 1..65536"));
      out_shape.set_tensor_shape(s, ::dali::TensorShape<3>(hw[0], hw[1], sh[2]));
    }
    output_desc.resize(1);
    output_desc[0].type = DALI_UINT8;
    output_desc[0].shape = out_shape;
    return true;
  }

  void RunImpl(::dali::Workspace &ws) override {
    const auto &images = ws.Input<::dali::CPUBackend>(0);
    const auto &sizes = ws.Input<::dali::CPUBackend>(1);
    auto &output = ws.Output<::dali::CPUBackend>(0);
    output.SetLayout(images.GetLayout());
    auto &tp = ws.GetThreadPool();
    for (int s = 0; s < images.num_samples(); s++) {
      auto sh = images.shape().tensor_shape_span(s);
      int hw[2];
      OutSize(sizes, s, hw);
      int64_t cost = int64_t(sh[0]) * sh[1] * sh[2] + int64_t(hw[0]) * hw[1] * sh[2];
      tp.AddWork([&, s](int) {
        auto shape = images.shape().tensor_shape_span(s);
        int size[2];
        OutSize(sizes, s, size);
        Resize(images.tensor<uint8_t>(s), shape[0], shape[1], shape[2],
               output.mutable_tensor<uint8_t>(s), size[0], size[1], filter_);
      }, cost);
    }
    tp.RunAll();
  }

 private:
  static void OutSize(const ::dali::TensorList<::dali::CPUBackend> &sizes, int s, int *hw) {
    for (int k = 0; k < 2; k++) {
      if (sizes.type() == DALI_INT32) {
        hw[k] = sizes.tensor<int>(s)[k];
      } else {
        float v = sizes.tensor<float>(s)[k];
        hw[k] = std::isfinite(v) && std::fabs(v) < 1e6f ? int(std::lround(v)) : -1;
      }
    }
  }

  int filter_;
};

}  // namespace dali_pipes

DALI_REGISTER_OPERATOR(DpResize, ::dali_pipes::DpResize, ::dali::CPU);

DALI_SCHEMA(DpResize)
    .DocStr("dali_pipes: antialiased separable resize of uint8 HWC images (PIL's scheme)")
    .NumInput(2)
    .NumOutput(1)
    .AddOptionalArg("filter", "0: triangle (bilinear), 1: cubic a = -0.5 (bicubic)", 0);
