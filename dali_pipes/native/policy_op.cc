// DpPolicy: an augmentation policy's operations (dali_pipes.policies) applied to uint8 HWC
// images in one CPU operator, each sample's slots in turn, on DALI's thread pool.
//
// Inputs (per sample): 0 the uint8 HWC image (1 or 3 channels); 1 float32 (slots, 2, 3)
// warp matrices (output -> input pixel coordinates, pixel centres at +0.5, as
// fn.warp_affine takes them); 2 float32 (slots, 10) parameters in the order of
// dali_pipes.policies.PHOTO_PARAMS, the last one the operation's index in OPS.
// Output: the uint8 image, same shape.
//
// The arithmetic is torchvision.transforms.v2.functional's on uint8 tensors: blends in
// float32 clamped then truncated, the gray level floored, sharpness with the rounded 3x3
// blur and the border kept, autocontrast per channel, equalize with torchvision's (PIL's)
// lookup table, geometry nearest-neighbour with fill 0.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dp_op.h"

namespace dali_pipes {

namespace {

enum Op {
  kIdentity = 0, kShearX, kShearY, kTranslateX, kTranslateY, kRotate, kBrightness, kColor,
  kContrast, kSharpness, kPosterize, kSolarize, kAutoContrast, kEqualize, kInvert, kNumOps
};
constexpr int kParams = 10;

// Image view: H x W x C uint8, contiguous.
struct Image {
  uint8_t *data;
  int h, w, c;
  int64_t size() const { return int64_t(h) * w * c; }
};

inline uint8_t TruncSat(float v) {
  // torchvision: clamp_(0, 255) then .to(uint8), which truncates toward zero
  if (!(v > 0.f)) return 0;  // also NaN
  if (v >= 255.f) return 255;
  return static_cast<uint8_t>(v);
}

// torchvision's _rgb_to_grayscale_image (preserve_dtype=False), floored:
// r * 0.2989, then + g * 0.587, then + b * 0.114, as torch's vectorised add with alpha does
// (a fused multiply-add).
inline float Gray(const uint8_t *px) {
  float l = float(px[0]) * 0.2989f;
  l = std::fma(float(px[1]), 0.587f, l);
  l = std::fma(float(px[2]), 0.114f, l);
  return std::floor(l);
}

// torchvision's _blend: image * ratio + other * (1 - ratio), clamped, truncated.
inline uint8_t Blend(float x, float other, float ratio, float rest) {
  return TruncSat(std::fma(other, rest, x * ratio));
}

void Geometry(const Image &in, Image &out, const float *m) {
  for (int y = 0; y < out.h; y++) {
    float yc = y + 0.5f;
    uint8_t *dst = out.data + int64_t(y) * out.w * out.c;
    for (int x = 0; x < out.w; x++) {
      float xc = x + 0.5f;
      float sx = m[0] * xc + m[1] * yc + m[2];
      float sy = m[3] * xc + m[4] * yc + m[5];
      int ix = static_cast<int>(std::floor(sx));
      int iy = static_cast<int>(std::floor(sy));
      uint8_t *d = dst + int64_t(x) * out.c;
      if (ix < 0 || iy < 0 || ix >= in.w || iy >= in.h) {
        std::memset(d, 0, out.c);
      } else {
        std::memcpy(d, in.data + (int64_t(iy) * in.w + ix) * in.c, in.c);
      }
    }
  }
}

void Brightness(Image &im, float f) {
  for (int64_t i = 0, n = im.size(); i < n; i++) im.data[i] = TruncSat(float(im.data[i]) * f);
}

void Color(Image &im, float f) {
  if (im.c != 3) return;  // torchvision: a 1-channel image is returned as is
  float rest = float(1.0 - double(f));
  for (int64_t p = 0, n = int64_t(im.h) * im.w; p < n; p++) {
    uint8_t *px = im.data + p * 3;
    float g = Gray(px);
    for (int k = 0; k < 3; k++) px[k] = Blend(px[k], g, f, rest);
  }
}

void Contrast(Image &im, float f) {
  int64_t n = int64_t(im.h) * im.w;
  int64_t sum = 0;  // the floored gray levels are integers: their sum is exact
  for (int64_t p = 0; p < n; p++) {
    const uint8_t *px = im.data + p * im.c;
    sum += im.c == 3 ? int64_t(Gray(px)) : int64_t(px[0]);
  }
  float mean = float(sum) / float(n);
  float rest = float(1.0 - double(f));
  for (int64_t i = 0, m = im.size(); i < m; i++) im.data[i] = Blend(im.data[i], mean, f, rest);
}

void Sharpness(const Image &in, Image &out, float f) {
  std::memcpy(out.data, in.data, in.size());
  if (in.h <= 2 || in.w <= 2) return;
  float rest = float(1.0 - double(f));
  int64_t row = int64_t(in.w) * in.c;
  for (int y = 1; y < in.h - 1; y++) {
    for (int x = 1; x < in.w - 1; x++) {
      for (int k = 0; k < in.c; k++) {
        const uint8_t *s = in.data + y * row + int64_t(x) * in.c + k;
        int sum = 4 * s[0];  // the kernel: 1 everywhere, 5 in the middle, over 13
        for (int dy = -1; dy <= 1; dy++)
          for (int dx = -1; dx <= 1; dx++) sum += s[dy * row + dx * in.c];
        // round(sum / 13): never a tie (13 is odd), so exact in integers
        int blurred = (2 * sum + 13) / 26;
        float xv = float(s[0]);
        out.data[y * row + int64_t(x) * in.c + k] =
            TruncSat(std::fma(float(blurred) - xv, rest, xv));
      }
    }
  }
}

void Posterize(Image &im, float divisor) {
  uint8_t mask = static_cast<uint8_t>(256 - static_cast<int>(divisor));
  for (int64_t i = 0, n = im.size(); i < n; i++) im.data[i] &= mask;
}

void Solarize(Image &im, float threshold, bool invert_all) {
  for (int64_t i = 0, n = im.size(); i < n; i++) {
    uint8_t v = im.data[i];
    if (invert_all || float(v) >= threshold) im.data[i] = 255 - v;
  }
}

void AutoContrast(Image &im) {
  for (int k = 0; k < im.c; k++) {
    int lo = 255, hi = 0;
    for (int64_t i = k, n = im.size(); i < n; i += im.c) {
      lo = std::min<int>(lo, im.data[i]);
      hi = std::max<int>(hi, im.data[i]);
    }
    if (lo == hi) continue;  // torchvision: minimum 0, scale 1, the channel unchanged
    float inv_scale = float(hi - lo) * (1.0f / 255.0f);
    float flo = float(lo);
    for (int64_t i = k, n = im.size(); i < n; i += im.c)
      im.data[i] = TruncSat((float(im.data[i]) - flo) / inv_scale);
  }
}

void Equalize(Image &im) {
  int64_t n = int64_t(im.h) * im.w;
  for (int k = 0; k < im.c; k++) {
    int64_t hist[256] = {0};
    for (int64_t i = k, m = im.size(); i < m; i += im.c) hist[im.data[i]]++;
    int last = 255;
    while (last > 0 && hist[last] == 0) last--;
    int64_t step = (n - hist[last]) / 255;
    if (step == 0) continue;  // torchvision returns such a channel as is
    uint8_t lut[256];
    lut[0] = 0;
    int64_t cum = 0;
    for (int v = 1; v < 256; v++) {
      cum += hist[v - 1];
      lut[v] = static_cast<uint8_t>(std::min<int64_t>((cum + step / 2) / step, 255));
    }
    for (int64_t i = k, m = im.size(); i < m; i += im.c) im.data[i] = lut[im.data[i]];
  }
}

// One slot of one sample: from `cur` (the image so far) into `cur` itself or `spare`;
// returns whether the result is in `spare`.
bool ApplySlot(Image &cur, Image &spare, const float *mat, const float *p) {
  int op = static_cast<int>(p[9]);
  switch (op) {
    case kShearX: case kShearY: case kTranslateX: case kTranslateY: case kRotate:
      Geometry(cur, spare, mat);
      return true;
    case kSharpness:
      Sharpness(cur, spare, p[3]);
      return true;
    case kBrightness: Brightness(cur, p[0]); break;
    case kColor: Color(cur, p[1]); break;
    case kContrast: Contrast(cur, p[2]); break;
    case kPosterize: Posterize(cur, p[4]); break;
    case kSolarize: Solarize(cur, p[5], false); break;
    case kAutoContrast: AutoContrast(cur); break;
    case kEqualize: Equalize(cur); break;
    case kInvert: Solarize(cur, 0.f, true); break;
    default: break;
  }
  return false;
}

}  // namespace

class DpPolicy : public DpOp {
 public:
  explicit DpPolicy(const ::dali::OpSpec &spec) : DpOp(spec) {}

 protected:
  bool SetupImpl(std::vector<::dali::OutputDesc> &output_desc,
                 const ::dali::Workspace &ws) override {
    const auto &images = Uint8Images(ws, "DpPolicy: input 0 (images) must be uint8 HWC");
    const auto &mats = ws.Input<CPU>(1);
    const auto &params = ws.Input<CPU>(2);
    DALI_ENFORCE(mats.type() == DALI_FLOAT && params.type() == DALI_FLOAT,
                 "DpPolicy: inputs 1 (matrices) and 2 (params) must be float32");
    const auto &shape = images.shape();
    int n = shape.num_samples();
    DALI_ENFORCE(mats.num_samples() == n && params.num_samples() == n,
                 "DpPolicy: the three inputs must have the same number of samples");
    for (int s = 0; s < n; s++) {
      auto sh = shape.tensor_shape_span(s);
      DALI_ENFORCE(sh.size() == 3 && (sh[2] == 1 || sh[2] == 3),
                   ::dali::make_string("DpPolicy: sample ", s, " must be HWC with 1 or 3 "
                                       "channels, got shape ", shape[s]));
      int64_t slots = params.shape().tensor_size(s) / kParams;
      DALI_ENFORCE(params.shape().tensor_size(s) == slots * kParams &&
                   mats.shape().tensor_size(s) == slots * 6,
                   ::dali::make_string("DpPolicy: sample ", s, " needs (slots, 2, 3) "
                                       "matrices and (slots, 10) params, got ", mats.shape()[s],
                                       " and ", params.shape()[s]));
      const float *p = params.tensor<float>(s);
      for (int64_t k = 0; k < slots; k++) {
        float op = p[k * kParams + 9];
        DALI_ENFORCE(op >= 0 && op < float(kNumOps) && op == std::floor(op),
                     ::dali::make_string("DpPolicy: sample ", s, " slot ", k,
                                         ": operation index ", op, " is not in 0..",
                                         kNumOps - 1));
      }
    }
    return Uint8Output(output_desc, shape);
  }

  void RunImpl(::dali::Workspace &ws) override {
    const auto &images = ws.Input<CPU>(0);
    const auto &mats = ws.Input<CPU>(1);
    const auto &params = ws.Input<CPU>(2);
    auto &output = ws.Output<CPU>(0);
    ForEachImage(ws, [&](int s, auto sh) {
        int h = sh[0], w = sh[1], c = sh[2];
        Image out{output.mutable_tensor<uint8_t>(s), h, w, c};
        std::memcpy(out.data, images.tensor<uint8_t>(s), out.size());
        thread_local std::vector<uint8_t> buffer;  // reused: no page faults per sample
        Image spare{nullptr, h, w, c};
        const float *m = mats.tensor<float>(s);
        const float *p = params.tensor<float>(s);
        int64_t slots = params.shape().tensor_size(s) / kParams;
        Image cur = out;
        for (int64_t k = 0; k < slots; k++) {
          const float *pk = p + k * kParams;
          int op = static_cast<int>(pk[9]);
          if (op == kIdentity) continue;
          if (!spare.data) {
            buffer.resize(out.size());
            spare.data = buffer.data();
          }
          if (ApplySlot(cur, spare, m + k * 6, pk)) std::swap(cur, spare);
        }
        if (cur.data != out.data) std::memcpy(out.data, cur.data, out.size());
    });
  }
};

}  // namespace dali_pipes

DP_REGISTER_OPERATOR(DpPolicy);

DALI_SCHEMA(DpPolicy)
    .DocStr("dali_pipes: an augmentation policy's operations (torchvision's uint8 arithmetic) "
            "on uint8 HWC images, each sample's slots in turn")
    .NumInput(3)
    .NumOutput(1);
