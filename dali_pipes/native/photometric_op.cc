// DpPhotometric: colour jitter and grayscale (dali_pipes.photometric) on uint8 HWC RGB
// images in one CPU operator, per sample on DALI's thread pool: brightness, contrast,
// saturation, hue, then grayscale, each as torchvision.transforms.v2.functional computes it
// on uint8 tensors and rounded back to uint8 after every step as torchvision does.
//
// Inputs (per sample): 0 the uint8 HWC image (3 channels); 1 float32 (5,) jitter row
// [brightness, contrast, saturation, hue turns, grayscale 0/1]. Argument "adjust": a bit
// mask of the adjustments the recipe enables (1 brightness, 2 contrast, 4 saturation,
// 8 hue, 16 grayscale; grayscale then applies where the row's flag is 1). Output: the uint8
// image, same shape.
//
// torchvision's arithmetic, in float32:
// - brightness: x * f, clamped to [0, 255], truncated;
// - contrast: _blend(x, mean, f) = x * f + mean * (1 - f) (a fused multiply-add, as torch's
//   vectorised add with alpha), clamped, truncated; `mean` is the mean of the floored gray
//   levels (r 0.2989, then + g 0.587, then + b 0.114, each a fused multiply-add);
// - saturation: _blend(x, floored gray of the pixel, f);
// - hue: x * (1 / 255), _rgb_to_hsv, h + shift modulo 1, _hsv_to_rgb, then * 255.999
//   truncated (to_dtype_image's float -> uint8);
// - grayscale: the gray level truncated, in all three channels.
// Brightness and contrast depend on the channel value alone: one 256-entry table per
// sample does both (contrast needs the mean after brightness: a first pass sums it). The
// rest runs in one pass over blocks of pixels, de-interleaved into per-thread float
// scratch so that the compiler vectorises each step.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dali/pipeline/operator/operator.h"

namespace dali_pipes {

namespace {

enum Adjust {
  kBrightness = 1, kContrast = 2, kSaturation = 4, kHue = 8, kGrayscale = 16, kAllAdjust = 31
};
constexpr int kJitter = 5;
constexpr int kBlock = 256;  // pixels per block of the per-pixel pass

constexpr float kGrayR = 0.2989f, kGrayG = 0.587f, kGrayB = 0.114f;
constexpr float kToUnit = float(1.0 / 255.0);      // to_dtype_image: uint8 -> float32
constexpr float kToByte = float(255.0 + 1.0 - 1e-3);  // to_dtype_image: float32 -> uint8
constexpr float kSixth = float(1.0 / 6.0);

// torchvision's _rgb_to_grayscale_image, before any rounding: r * 0.2989, then
// + g * 0.587, then + b * 0.114, each addition fused as torch's add with alpha is.
inline float GrayLevel(float r, float g, float b) {
  return std::fma(b, kGrayB, std::fma(g, kGrayG, r * kGrayR));
}

// clamp_(0, 255) then .to(uint8), which truncates toward zero; as a float
inline float TruncSat(float v) { return std::trunc(std::min(std::max(v, 0.f), 255.f)); }

inline uint8_t TruncSatByte(float v) {
  if (!(v > 0.f)) return 0;
  if (v >= 255.f) return 255;
  return static_cast<uint8_t>(v);
}

// The brightness-then-contrast table of one sample; `in` is needed for contrast's mean.
void ValueTable(const uint8_t *in, int64_t pixels, const float *jit, int adjust,
                uint8_t *lut) {
  for (int v = 0; v < 256; v++) lut[v] = static_cast<uint8_t>(v);
  if ((adjust & kBrightness) && jit[0] != 1.f) {
    for (int v = 0; v < 256; v++) lut[v] = TruncSatByte(float(v) * jit[0]);
  }
  if (!(adjust & kContrast) || jit[1] == 1.f) return;
  // the floored gray levels are integers: their sum is exact
  int64_t sum = 0;
  for (int64_t p = 0; p < pixels; p++) {
    const uint8_t *px = in + p * 3;
    sum += int64_t(std::floor(GrayLevel(lut[px[0]], lut[px[1]], lut[px[2]])));
  }
  float mean = float(sum) / float(pixels);
  float f = jit[1], rest = float(1.0 - double(jit[1]));
  for (int v = 0; v < 256; v++) lut[v] = TruncSatByte(std::fma(mean, rest, float(lut[v]) * f));
}

struct Block {
  alignas(64) float r[kBlock];
  alignas(64) float g[kBlock];
  alignas(64) float b[kBlock];
};

void Saturation(Block &x, int n, float f) {
  float rest = float(1.0 - double(f));
  for (int i = 0; i < n; i++) {
    float gray = std::floor(GrayLevel(x.r[i], x.g[i], x.b[i]));
    x.r[i] = TruncSat(std::fma(gray, rest, x.r[i] * f));
    x.g[i] = TruncSat(std::fma(gray, rest, x.g[i] * f));
    x.b[i] = TruncSat(std::fma(gray, rest, x.b[i] * f));
  }
}

// torchvision's adjust_hue_image on one block (values 0..255 in, 0..255 out).
void Hue(Block &x, int n, float shift) {
  for (int i = 0; i < n; i++) {
    float r = x.r[i] * kToUnit, g = x.g[i] * kToUnit, b = x.b[i] * kToUnit;
    // _rgb_to_hsv
    float maxc = std::max(std::max(r, g), b);
    float minc = std::min(std::min(r, g), b);
    bool eqc = maxc == minc;
    float range = maxc - minc;
    float s = range / (eqc ? 1.f : maxc);
    float div = eqc ? 1.f : range;
    float rc = (maxc - r) / div, gc = (maxc - g) / div, bc = (maxc - b) / div;
    bool neq_r = maxc != r, eq_g = maxc == g;
    float hg = ((rc + 2.f) - bc) * float(eq_g && neq_r);
    float hr = (bc - gc) * float(!neq_r);
    float hb = ((gc + 4.f) - rc) * float(neq_r && !eq_g);
    float h = ((hr + hg) + hb) * kSixth + 1.f;
    h = h >= 1.f ? h - 1.f : h;  // fmod(h, 1): h is in [5/6, 11/6) here, h - 1 is exact
    // the shift, then remainder(h, 1) (h + shift is in [-0.5, 1.5])
    h = h + shift;
    h = h < 0.f ? h + 1.f : (h >= 1.f ? h - 1.f : h);
    // _hsv_to_rgb
    float h6 = h * 6.f;
    float fi = std::floor(h6);
    float f = h6 - fi;
    int k = int(fi);
    k = k >= 6 ? k - 6 : k;
    float v = maxc;
    float sxf = s * f;
    float oms = 1.f - s;
    float q = std::min(std::max((1.f - sxf) * v, 0.f), 1.f);
    float t = std::min(std::max((sxf + oms) * v, 0.f), 1.f);
    float p = std::min(std::max(oms * v, 0.f), 1.f);
    // (v, p, q, t) -> rgb: torchvision's select table [[0,2,1,1,3,0],[3,0,0,2,1,1],
    // [1,1,3,0,0,2]] over k
    float ro = k == 0 || k == 5 ? v : k == 1 ? q : k == 4 ? t : p;
    float go = k == 1 || k == 2 ? v : k == 0 ? t : k == 3 ? q : p;
    float bo = k == 3 || k == 4 ? v : k == 2 ? t : k == 5 ? q : p;
    x.r[i] = std::trunc(ro * kToByte);
    x.g[i] = std::trunc(go * kToByte);
    x.b[i] = std::trunc(bo * kToByte);
  }
}

void Grayscale(Block &x, int n) {
  for (int i = 0; i < n; i++) {
    float l = std::trunc(GrayLevel(x.r[i], x.g[i], x.b[i]));
    x.r[i] = l;
    x.g[i] = l;
    x.b[i] = l;
  }
}

// One sample: `in` and `out` are (pixels, 3) uint8.
void Photometric(const uint8_t *in, uint8_t *out, int64_t pixels, const float *jit,
                 int adjust) {
  bool sat = (adjust & kSaturation) && jit[2] != 1.f;
  bool hue = (adjust & kHue) != 0;  // torchvision round-trips through HSV even for shift 0
  bool gray = (adjust & kGrayscale) && jit[4] != 0.f;
  uint8_t lut[256];
  ValueTable(in, pixels, jit, adjust, lut);
  if (!sat && !hue && !gray) {
    for (int64_t i = 0; i < pixels * 3; i++) out[i] = lut[in[i]];
    return;
  }
  thread_local Block x;
  for (int64_t p0 = 0; p0 < pixels; p0 += kBlock) {
    int n = int(std::min<int64_t>(kBlock, pixels - p0));
    const uint8_t *src = in + p0 * 3;
    for (int i = 0; i < n; i++) {
      x.r[i] = lut[src[3 * i]];
      x.g[i] = lut[src[3 * i + 1]];
      x.b[i] = lut[src[3 * i + 2]];
    }
    if (sat) Saturation(x, n, jit[2]);
    if (hue) Hue(x, n, jit[3]);
    if (gray) Grayscale(x, n);
    uint8_t *dst = out + p0 * 3;
    for (int i = 0; i < n; i++) {
      dst[3 * i] = static_cast<uint8_t>(x.r[i]);
      dst[3 * i + 1] = static_cast<uint8_t>(x.g[i]);
      dst[3 * i + 2] = static_cast<uint8_t>(x.b[i]);
    }
  }
}

}  // namespace

class DpPhotometric : public ::dali::Operator<::dali::CPUBackend> {
 public:
  explicit DpPhotometric(const ::dali::OpSpec &spec)
      : ::dali::Operator<::dali::CPUBackend>(spec), adjust_(spec.GetArgument<int>("adjust")) {
    DALI_ENFORCE(adjust_ >= 0 && adjust_ <= kAllAdjust,
                 ::dali::make_string("DpPhotometric: adjust must be a bit mask in 0..",
                                     int(kAllAdjust), ", got ", adjust_));
  }

 protected:
  bool SetupImpl(std::vector<::dali::OutputDesc> &output_desc,
                 const ::dali::Workspace &ws) override {
    const auto &images = ws.Input<::dali::CPUBackend>(0);
    const auto &jitter = ws.Input<::dali::CPUBackend>(1);
    DALI_ENFORCE(images.type() == DALI_UINT8,
                 "DpPhotometric: input 0 (images) must be uint8 HWC");
    DALI_ENFORCE(jitter.type() == DALI_FLOAT, "DpPhotometric: input 1 (jitter) must be float32");
    const auto &shape = images.shape();
    int n = shape.num_samples();
    DALI_ENFORCE(jitter.num_samples() == n,
                 "DpPhotometric: images and jitter must have the same number of samples");
    for (int s = 0; s < n; s++) {
      auto sh = shape.tensor_shape_span(s);
      DALI_ENFORCE(sh.size() == 3 && sh[2] == 3,
                   ::dali::make_string("DpPhotometric: sample ", s, " must be an HWC image "
                                       "with 3 channels, got shape ", shape[s]));
      DALI_ENFORCE(jitter.shape().tensor_size(s) == kJitter,
                   ::dali::make_string("DpPhotometric: sample ", s, " needs a (5,) jitter "
                                       "row, got shape ", jitter.shape()[s]));
      const float *j = jitter.tensor<float>(s);
      static const char *names[] = {"brightness", "contrast", "saturation"};
      for (int k = 0; k < 3; k++) {
        DALI_ENFORCE(!(adjust_ & (1 << k)) || (std::isfinite(j[k]) && j[k] >= 0.f),
                     ::dali::make_string("DpPhotometric: sample ", s, " ", names[k],
                                         " factor ", j[k], " is not a finite number >= 0"));
      }
      DALI_ENFORCE(!(adjust_ & kHue) || (j[3] >= -0.5f && j[3] <= 0.5f),
                   ::dali::make_string("DpPhotometric: sample ", s, " hue shift ", j[3],
                                       " is not in [-0.5, 0.5]"));
      DALI_ENFORCE(!(adjust_ & kGrayscale) || j[4] == 0.f || j[4] == 1.f,
                   ::dali::make_string("DpPhotometric: sample ", s, " grayscale flag ", j[4],
                                       " is not 0 or 1"));
    }
    output_desc.resize(1);
    output_desc[0].type = DALI_UINT8;
    output_desc[0].shape = shape;
    return true;
  }

  void RunImpl(::dali::Workspace &ws) override {
    const auto &images = ws.Input<::dali::CPUBackend>(0);
    const auto &jitter = ws.Input<::dali::CPUBackend>(1);
    auto &output = ws.Output<::dali::CPUBackend>(0);
    output.SetLayout(images.GetLayout());
    auto &tp = ws.GetThreadPool();
    const auto &shape = images.shape();
    for (int s = 0; s < shape.num_samples(); s++) {
      tp.AddWork([&, s](int) {
        auto sh = shape.tensor_shape_span(s);
        Photometric(images.tensor<uint8_t>(s), output.mutable_tensor<uint8_t>(s),
                    int64_t(sh[0]) * sh[1], jitter.tensor<float>(s), adjust_);
      }, shape.tensor_size(s));
    }
    tp.RunAll();
  }

 private:
  int adjust_;
};

}  // namespace dali_pipes

DALI_REGISTER_OPERATOR(DpPhotometric, ::dali_pipes::DpPhotometric, ::dali::CPU);

DALI_SCHEMA(DpPhotometric)
    .DocStr("dali_pipes: colour jitter and grayscale (torchvision's uint8 arithmetic, rounded "
            "after every step) on uint8 HWC RGB images, per-sample (5,) jitter rows")
    .NumInput(2)
    .NumOutput(1)
    .AddOptionalArg("adjust", "bit mask: 1 brightness, 2 contrast, 4 saturation, 8 hue, "
                    "16 grayscale", 0);
