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
// scratch, 8 pixels at a time with AVX2 intrinsics where the build has AVX2 and FMA (the
// same operations as the scalar form, which does the rest).
//
// Contrast's mean: torch sums the float32 gray levels and divides by the pixel count; here
// the integer sum is exact and rounded once to float32. The two are the same number while
// torch's partial sums stay below 2^24 (any image of up to 65793 pixels) and may differ in
// the last bit beyond, which moves a pixel only where a blend lands next to an integer.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "dp_op.h"

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

// One pixel, scalar: the reference form of each step (non-AVX2 builds, and the last
// pixels of a block that do not fill 8 lanes).
inline void SaturationPx(float &r, float &g, float &b, float f, float rest) {
  float gray = std::floor(GrayLevel(r, g, b));
  r = TruncSat(std::fma(gray, rest, r * f));
  g = TruncSat(std::fma(gray, rest, g * f));
  b = TruncSat(std::fma(gray, rest, b * f));
}

// torchvision's adjust_hue_image on one pixel (values 0..255 in, 0..255 out).
inline void HuePx(float &rr, float &gg, float &bb, float shift) {
  float r = rr * kToUnit, g = gg * kToUnit, b = bb * kToUnit;
  // _rgb_to_hsv
  float maxc = std::max(std::max(r, g), b);
  float minc = std::min(std::min(r, g), b);
  bool eqc = maxc == minc;
  float range = maxc - minc;
  float s = range / (eqc ? 1.f : maxc);
  float div = eqc ? 1.f : range;
  float rc = (maxc - r) / div, gc = (maxc - g) / div, bc = (maxc - b) / div;
  // torchvision multiplies each candidate by its 0/1 mask and adds the three: the sum is
  // the one candidate whose mask is set
  float hr = bc - gc, hg = (rc + 2.f) - bc, hb = (gc + 4.f) - rc;
  float h = (maxc == r ? hr : maxc == g ? hg : hb) * kSixth + 1.f;
  h = h >= 1.f ? h - 1.f : h;  // fmod(h, 1): h is in [5/6, 11/6) here, h - 1 is exact
  // the shift, then remainder(h, 1) (h + shift is in [-0.5, 1.5])
  h = h + shift;
  h = h < 0.f ? h + 1.f : (h >= 1.f ? h - 1.f : h);
  // _hsv_to_rgb
  float h6 = h * 6.f;
  float fi = std::floor(h6);
  float f = h6 - fi;
  int k = int(fi);
  k = k >= 6 ? k - 6 : k;  // i.remainder_(6): h6 is in [0, 6]
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
  rr = std::trunc(ro * kToByte);
  gg = std::trunc(go * kToByte);
  bb = std::trunc(bo * kToByte);
}

inline void GrayscalePx(float &r, float &g, float &b) {
  float l = std::trunc(GrayLevel(r, g, b));
  r = l;
  g = l;
  b = l;
}

#if defined(__AVX2__) && defined(__FMA__)
// The same steps on 8 pixels, operation for operation (selects for the ternaries).
constexpr int kLanes = 8;
using V = __m256;

inline V Set(float v) { return _mm256_set1_ps(v); }
inline V Add(V a, V b) { return _mm256_add_ps(a, b); }
inline V Sub(V a, V b) { return _mm256_sub_ps(a, b); }
inline V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
inline V Div(V a, V b) { return _mm256_div_ps(a, b); }
inline V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline V Eq(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
inline V Ge(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
inline V Lt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
inline V Or(V a, V b) { return _mm256_or_ps(a, b); }
inline V Pick(V mask, V a, V b) { return _mm256_blendv_ps(b, a, mask); }  // mask ? a : b
inline V Floor(V a) { return _mm256_floor_ps(a); }
inline V Trunc(V a) { return _mm256_round_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); }
// std::max(a, b) / std::min(a, b) for numbers: (a < b) ? b : a, (b < a) ? b : a
inline V Max(V a, V b) { return _mm256_max_ps(a, b); }
inline V Min(V a, V b) { return _mm256_min_ps(a, b); }
inline V Clamp(V a, float lo, float hi) { return Min(Max(a, Set(lo)), Set(hi)); }
inline V Gray(V r, V g, V b) {
  return Fma(b, Set(kGrayB), Fma(g, Set(kGrayG), Mul(r, Set(kGrayR))));
}

void Saturation8(float *r, float *g, float *b, float f, float rest) {
  V vr = _mm256_load_ps(r), vg = _mm256_load_ps(g), vb = _mm256_load_ps(b);
  V gray = Floor(Gray(vr, vg, vb)), vf = Set(f), vrest = Set(rest);
  _mm256_store_ps(r, Trunc(Clamp(Fma(gray, vrest, Mul(vr, vf)), 0.f, 255.f)));
  _mm256_store_ps(g, Trunc(Clamp(Fma(gray, vrest, Mul(vg, vf)), 0.f, 255.f)));
  _mm256_store_ps(b, Trunc(Clamp(Fma(gray, vrest, Mul(vb, vf)), 0.f, 255.f)));
}

void Hue8(float *rp, float *gp, float *bp, float shift) {
  V one = Set(1.f), zero = Set(0.f);
  V r = Mul(_mm256_load_ps(rp), Set(kToUnit));
  V g = Mul(_mm256_load_ps(gp), Set(kToUnit));
  V b = Mul(_mm256_load_ps(bp), Set(kToUnit));
  V maxc = Max(Max(r, g), b);
  V minc = Min(Min(r, g), b);
  V eqc = Eq(maxc, minc);
  V range = Sub(maxc, minc);
  V s = Div(range, Pick(eqc, one, maxc));
  V div = Pick(eqc, one, range);
  V rc = Div(Sub(maxc, r), div), gc = Div(Sub(maxc, g), div), bc = Div(Sub(maxc, b), div);
  V hr = Sub(bc, gc), hg = Sub(Add(rc, Set(2.f)), bc), hb = Sub(Add(gc, Set(4.f)), rc);
  V h = Add(Mul(Pick(Eq(maxc, r), hr, Pick(Eq(maxc, g), hg, hb)), Set(kSixth)), one);
  h = Pick(Ge(h, one), Sub(h, one), h);
  h = Add(h, Set(shift));
  h = Pick(Lt(h, zero), Add(h, one), Pick(Ge(h, one), Sub(h, one), h));
  V h6 = Mul(h, Set(6.f));
  V fi = Floor(h6);
  V f = Sub(h6, fi);
  fi = Pick(Ge(fi, Set(6.f)), Sub(fi, Set(6.f)), fi);
  V v = maxc;
  V sxf = Mul(s, f);
  V oms = Sub(one, s);
  V q = Clamp(Mul(Sub(one, sxf), v), 0.f, 1.f);
  V t = Clamp(Mul(Add(sxf, oms), v), 0.f, 1.f);
  V p = Clamp(Mul(oms, v), 0.f, 1.f);
  V k0 = Eq(fi, zero), k1 = Eq(fi, one), k2 = Eq(fi, Set(2.f)), k3 = Eq(fi, Set(3.f));
  V k4 = Eq(fi, Set(4.f)), k5 = Eq(fi, Set(5.f));
  V ro = Pick(Or(k0, k5), v, Pick(k1, q, Pick(k4, t, p)));
  V go = Pick(Or(k1, k2), v, Pick(k0, t, Pick(k3, q, p)));
  V bo = Pick(Or(k3, k4), v, Pick(k2, t, Pick(k5, q, p)));
  _mm256_store_ps(rp, Trunc(Mul(ro, Set(kToByte))));
  _mm256_store_ps(gp, Trunc(Mul(go, Set(kToByte))));
  _mm256_store_ps(bp, Trunc(Mul(bo, Set(kToByte))));
}

void Grayscale8(float *r, float *g, float *b) {
  V l = Trunc(Gray(_mm256_load_ps(r), _mm256_load_ps(g), _mm256_load_ps(b)));
  _mm256_store_ps(r, l);
  _mm256_store_ps(g, l);
  _mm256_store_ps(b, l);
}
#endif

// Per-thread scratch: one block of pixels, de-interleaved.
struct Block {
  alignas(64) float r[kBlock];
  alignas(64) float g[kBlock];
  alignas(64) float b[kBlock];
};

// The steps on a block's first n pixels: 8 lanes at a time (where built with AVX2 and
// `vectorized`), the rest one by one.
void Steps(Block &x, int n, const float *jit, bool sat, bool hue, bool gray, bool vectorized) {
  float f = jit[2], rest = float(1.0 - double(jit[2])), shift = jit[3];
  int i = 0;
#if defined(__AVX2__) && defined(__FMA__)
  for (; vectorized && i + kLanes <= n; i += kLanes) {
    if (sat) Saturation8(x.r + i, x.g + i, x.b + i, f, rest);
    if (hue) Hue8(x.r + i, x.g + i, x.b + i, shift);
    if (gray) Grayscale8(x.r + i, x.g + i, x.b + i);
  }
#else
  (void)vectorized;
#endif
  for (; i < n; i++) {
    if (sat) SaturationPx(x.r[i], x.g[i], x.b[i], f, rest);
    if (hue) HuePx(x.r[i], x.g[i], x.b[i], shift);
    if (gray) GrayscalePx(x.r[i], x.g[i], x.b[i]);
  }
}

// One sample: `in` and `out` are (pixels, 3) uint8.
void Photometric(const uint8_t *in, uint8_t *out, int64_t pixels, const float *jit,
                 int adjust, bool vectorized) {
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
    Steps(x, n, jit, sat, hue, gray, vectorized);
    uint8_t *dst = out + p0 * 3;
    for (int i = 0; i < n; i++) {
      dst[3 * i] = static_cast<uint8_t>(x.r[i]);
      dst[3 * i + 1] = static_cast<uint8_t>(x.g[i]);
      dst[3 * i + 2] = static_cast<uint8_t>(x.b[i]);
    }
  }
}

}  // namespace

class DpPhotometric : public DpOp {
 public:
  explicit DpPhotometric(const ::dali::OpSpec &spec)
      : DpOp(spec), adjust_(spec.GetArgument<int>("adjust")),
        vectorized_(spec.GetArgument<bool>("vectorized")) {
    DALI_ENFORCE(adjust_ >= 0 && adjust_ <= kAllAdjust,
                 ::dali::make_string("DpPhotometric: adjust must be a bit mask in 0..",
                                     int(kAllAdjust), ", got ", adjust_));
  }

 protected:
  bool SetupImpl(std::vector<::dali::OutputDesc> &output_desc,
                 const ::dali::Workspace &ws) override {
    const auto &images = Uint8Images(ws, "DpPhotometric: input 0 (images) must be uint8 HWC");
    const auto &jitter = ws.Input<CPU>(1);
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
    return Uint8Output(output_desc, shape);
  }

  void RunImpl(::dali::Workspace &ws) override {
    const auto &images = ws.Input<CPU>(0);
    const auto &jitter = ws.Input<CPU>(1);
    auto &output = ws.Output<CPU>(0);
    ForEachImage(ws, [&](int s, auto sh) {
      Photometric(images.tensor<uint8_t>(s), output.mutable_tensor<uint8_t>(s),
                  int64_t(sh[0]) * sh[1], jitter.tensor<float>(s), adjust_, vectorized_);
    });
  }

 private:
  int adjust_;
  bool vectorized_;
};

}  // namespace dali_pipes

DP_REGISTER_OPERATOR(DpPhotometric);

DALI_SCHEMA(DpPhotometric)
    .DocStr("dali_pipes: colour jitter and grayscale (torchvision's uint8 arithmetic, rounded "
            "after every step) on uint8 HWC RGB images, per-sample (5,) jitter rows")
    .NumInput(2)
    .NumOutput(1)
    .AddOptionalArg("adjust", "bit mask: 1 brightness, 2 contrast, 4 saturation, 8 hue, "
                    "16 grayscale", 0)
    .AddOptionalArg("vectorized", "false: the scalar form on every pixel (for tests; the "
                    "results are the same)", true);
