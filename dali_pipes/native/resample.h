// resample.h: antialiased separable resampling of uint8 HWC images, the scheme PIL's and
// torchvision's antialiased resize use (see resize_op.cc), shared by DpResize
// (resize_op.cc) and DpDecodeCropResize (decode_crop_op.cc). Part of every operator's build
// cache key (dali_pipes/native/builder.py).
#ifndef DALI_PIPES_NATIVE_RESAMPLE_H_
#define DALI_PIPES_NATIVE_RESAMPLE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

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

#if defined(__AVX2__)
// 8 bytes -> 8 floats
inline __m256 Load8(const uint8_t *p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(
      reinterpret_cast<const __m128i *>(p))));
}
#endif

// One output row from N input rows `rowlen` apart: the taps summed in pairs, in registers,
// rounded into `dst`. The order of the float operations is fixed (a = w0 s0 + w1 s1, then
// a += w2 s2 + w3 s3, ..., a += w_last s_last): the output does not depend on N's path.
template <int N>
void RowTaps(const uint8_t *__restrict src, int64_t rowlen, const float *w,
             uint8_t *__restrict dst) {
  int64_t i = 0;
#if defined(__AVX2__)
  __m256 wv[N];
  for (int k = 0; k < N; k++) wv[k] = _mm256_set1_ps(w[k]);
  const __m256 half = _mm256_set1_ps(0.5f), lo = _mm256_setzero_ps(),
               hi = _mm256_set1_ps(255.f);
  for (; i + 8 <= rowlen; i += 8) {
    __m256 a;
    int k;
    if constexpr (N >= 2) {
      a = _mm256_add_ps(_mm256_mul_ps(wv[0], Load8(src + i)),
                        _mm256_mul_ps(wv[1], Load8(src + i + rowlen)));
      k = 2;
    } else {
      a = _mm256_mul_ps(wv[0], Load8(src + i));
      k = 1;
    }
    for (; k + 1 < N; k += 2)
      a = _mm256_add_ps(a, _mm256_add_ps(
          _mm256_mul_ps(wv[k], Load8(src + i + k * rowlen)),
          _mm256_mul_ps(wv[k + 1], Load8(src + i + (k + 1) * rowlen))));
    if (k < N) a = _mm256_add_ps(a, _mm256_mul_ps(wv[k], Load8(src + i + k * rowlen)));
    // RoundSat: min(max(a + 0.5, 0), 255), truncated
    __m256i v = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_add_ps(a, half), lo), hi));
    __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i *>(dst + i), _mm_packus_epi16(w16, w16));
  }
#endif
  for (; i < rowlen; i++) {
    float a;
    int k;
    if constexpr (N >= 2) {
      a = w[0] * float(src[i]) + w[1] * float(src[i + rowlen]);
      k = 2;
    } else {
      a = w[0] * float(src[i]);
      k = 1;
    }
    for (; k + 1 < N; k += 2)
      a += w[k] * float(src[i + k * rowlen]) + w[k + 1] * float(src[i + (k + 1) * rowlen]);
    if (k < N) a += w[k] * float(src[i + k * rowlen]);
    dst[i] = RoundSat(a);
  }
}

// out row r (of `rowlen` bytes) = sum_k w[r, k] * in row first[r] + k.
void ResampleRows(const uint8_t *in, int64_t rowlen, uint8_t *out, int out_rows,
                  const Taps &t, std::vector<float> &acc) {
  acc.resize(rowlen);
  float *__restrict a = acc.data();
  for (int r = 0; r < out_rows; r++) {
    const float *w = t.weights.data() + size_t(r) * t.ksize;
    const uint8_t *__restrict src = in + int64_t(t.first[r]) * rowlen;
    uint8_t *__restrict dst = out + int64_t(r) * rowlen;
    int n = t.count[r], k = 0;
    switch (n) {  // the usual tap counts, in registers
      case 1: RowTaps<1>(src, rowlen, w, dst); continue;
      case 2: RowTaps<2>(src, rowlen, w, dst); continue;
      case 3: RowTaps<3>(src, rowlen, w, dst); continue;
      case 4: RowTaps<4>(src, rowlen, w, dst); continue;
      case 5: RowTaps<5>(src, rowlen, w, dst); continue;
      case 6: RowTaps<6>(src, rowlen, w, dst); continue;
      default: break;
    }
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
    for (int64_t i = 0; i < rowlen; i++) dst[i] = RoundSat(a[i]);
  }
}

// (h, w, c) with rows `stride` bytes apart -> (w, h, c) contiguous, in tiles that stay in
// cache. With c == 3, pixels above the last row move as one 4-byte load and store: the
// load reads the next pixel's first byte (the last row's pixels are never read that way,
// so nothing past the input is read), the store writes the first byte of the pixel below,
// which is written after it (tiles go down the rows, each column down its tile).
void Transpose(const uint8_t *in, int h, int w, int c, int64_t stride, uint8_t *out) {
  const int tile = 32;
  for (int y0 = 0; y0 < h; y0 += tile) {
    int y1 = std::min(h, y0 + tile);
    for (int x0 = 0; x0 < w; x0 += tile) {
      int x1 = std::min(w, x0 + tile);
      if (c != 3) {
        for (int y = y0; y < y1; y++) {
          const uint8_t *src = in + int64_t(y) * stride + int64_t(x0) * c;
          for (int x = x0; x < x1; x++, src += c)
            std::memcpy(out + (int64_t(x) * h + y) * c, src, c);
        }
        continue;
      }
      const int y4 = std::min(y1, h - 1);  // rows moved 4 bytes at a time
      for (int x = x0; x < x1; x++) {
        const uint8_t *src = in + int64_t(y0) * stride + int64_t(x) * 3;
        uint8_t *d = out + (int64_t(x) * h + y0) * 3;
        for (int y = y0; y < y4; y++, src += stride, d += 3) {
          uint32_t v;
          std::memcpy(&v, src, 4);
          std::memcpy(d, &v, 4);
        }
        if (y4 < y1) std::memcpy(d, src, 3);
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
void ResizeFrame(const uint8_t *in, int h, int w, int c, int64_t stride, uint8_t *out,
                 const Plan &p, Scratch &s, bool across, bool down) {
  const int64_t row = int64_t(w) * c;
  if (!across && !down) {
    for (int y = 0; y < h; y++) std::memcpy(out + y * row, in + y * stride, size_t(row));
    return;
  }
  int r0 = down ? s.down.lo : 0, rows = (down ? s.down.hi : h) - r0;
  const uint8_t *band = in + int64_t(r0) * stride;  // the input rows the taps read
  int64_t band_row = stride;
  if (!across && stride != row) {  // the vertical pass reads whole rows: make them contiguous
    s.a.resize(size_t(rows) * row);
    for (int y = 0; y < rows; y++) std::memcpy(s.a.data() + y * row, band + y * stride, size_t(row));
    band = s.a.data();
    band_row = row;
  }
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

// A sample: a frame (HWC) or frames (FHWC), all with the same taps; `stride` bytes between
// input rows (0: w * c, contiguous).
inline void ResizeSample(const uint8_t *in, int frames, int h, int w, int c, uint8_t *out,
                         const Plan &p, int filter, bool antialias, int64_t stride = 0) {
  if (stride == 0) stride = int64_t(w) * c;
  thread_local Scratch s;
  bool across = !Identity(w, p.ow, p.x0, p.x1), down = !Identity(h, p.oh, p.y0, p.y1);
  if (across) MakeTaps(w, p.ow, filter, antialias, p.x0, p.x1, s.across);
  if (down) MakeTaps(h, p.oh, filter, antialias, p.y0, p.y1, s.down);
  for (int f = 0; f < frames; f++)
    ResizeFrame(in + int64_t(f) * h * stride, h, w, c, stride,
                out + int64_t(f) * p.oh * p.ow * c, p, s, across, down);
}

}  // namespace
}  // namespace dali_pipes

#endif  // DALI_PIPES_NATIVE_RESAMPLE_H_
