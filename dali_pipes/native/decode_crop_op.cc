// DpDecodeCropResize: a JPEG's crop window decoded with libjpeg-turbo's partial decoding
// and resized into the output, in one task per sample on DALI's thread pool.
//
// Only the window's iMCU columns are decoded (jpeg_crop_scanline), the rows above it are
// skipped (jpeg_skip_scanlines: entropy-decoded, not inverse-transformed) and decoding stops
// after its last row (jpeg_abort_decompress). One pixel of margin on each side is decoded
// and dropped, so fancy (smooth) chroma upsampling sees the same neighbours as in a full
// decode and the window's pixels are the full decode's. When `max_dct_factor` allows and
// the window is at least f times the output on both axes, the file is decoded at 1/f
// (f = 2, 4, 8: libjpeg's DCT scaling) and the resize reads the window at sub-pixel edges
// in the reduced pixels, as dali_pipes/formats/jpeg_scale.py does in the feed.
// The resize is DpResize's (resample.h), over the window only (the taps clipped to it).
//
// Inputs (per sample): 0 the encoded file (uint8); 1 int32 (2,) window top, left; 2 int32
// (2,) window height, width, in source pixels; optionally 3 int32 or float32 (2,) output
// height, width (else the `size` argument). Output: RGB at the output size, uint8 HWC by
// default; `mirror` (per sample) flips it horizontally, `output_layout` "CHW" makes it
// planar and `mean` / `std` (0..255 scale) normalise it to float32 as DALI's
// crop_mirror_normalize does ((v - mean) * (1 / std)), in the pass that writes the output.
// Files it does not decode (see DpJpegDecodable) raise an error naming the sample: the
// graph routes them to DALI's decoder first (dali_pipes/pipelines/image_decode.py).
//
// DpJpegDecodable: bool () per file, whether DpDecodeCropResize decodes it: a JPEG header
// libjpeg reads, 8-bit, one (grey) or three (YCbCr / RGB) components, an EOI marker in the
// last KiB (a truncated file goes to DALI's decoder).
// libjpeg's warnings are not errors (DALI's decoder recovers from them too), except "premature
// end of data".
#include <cstdio>  // before jpeglib.h, which uses FILE

#include <jpeglib.h>
#include <jerror.h>  // JWRN_JPEG_EOF

#include <array>
#include <cmath>
#include <csetjmp>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "dp_op.h"
#include "resample.h"

namespace dali_pipes {

namespace {

struct ErrorMgr {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void OnError(j_common_ptr cinfo) {
  auto *err = reinterpret_cast<ErrorMgr *>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void Quiet(j_common_ptr) {}  // warnings (corrupt data libjpeg recovers from) stay silent

// Warnings are recoverable, as for DALI's decoder, except the end of the data coming
// before the image's (a truncated file): an error there too.
void OnMessage(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) OnError(cinfo);
}

// Whether the file ends with an EOI marker (possibly followed by some padding): a
// truncated file goes to DALI's decoder, whose error is the one users see.
bool EndsWithEoi(const uint8_t *data, int64_t size) {
  for (int64_t i = size - 2; i >= 2 && i >= size - 1024; i--)
    if (data[i] == 0xFF && data[i + 1] == 0xD9) return true;
  return false;
}

// One libjpeg decompressor per thread, reused across samples.
struct Decoder {
  jpeg_decompress_struct cinfo;
  ErrorMgr err;
  Decoder() {
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = OnError;
    err.pub.output_message = Quiet;
    err.pub.emit_message = OnMessage;
    jpeg_create_decompress(&cinfo);
  }
  ~Decoder() { jpeg_destroy_decompress(&cinfo); }
};

Decoder &ThreadDecoder() {
  thread_local Decoder d;
  return d;
}

bool Supported(const jpeg_decompress_struct &c) {
  return c.data_precision == 8 &&
         ((c.num_components == 1 && c.jpeg_color_space == JCS_GRAYSCALE) ||
          (c.num_components == 3 &&
           (c.jpeg_color_space == JCS_YCbCr || c.jpeg_color_space == JCS_RGB)));
}

// Whether the file's header reads and is one the decoder handles.
bool Decodable(const uint8_t *data, int64_t size) {
  if (size < 4 || data[0] != 0xFF || data[1] != 0xD8 || !EndsWithEoi(data, size))
    return false;
  Decoder &d = ThreadDecoder();
  if (setjmp(d.err.jump)) {
    jpeg_abort_decompress(&d.cinfo);
    return false;
  }
  jpeg_mem_src(&d.cinfo, data, static_cast<unsigned long>(size));  // NOLINT(runtime/int)
  bool ok = jpeg_read_header(&d.cinfo, TRUE) == JPEG_HEADER_OK && Supported(d.cinfo);
  jpeg_abort_decompress(&d.cinfo);
  return ok;
}

struct Job {
  int top, left, height, width;  // the window, source pixels
  int oh, ow;                    // output size
  int max_factor, filter;
  bool antialias, fast_idct;
  bool mirror;
};

// How the resized window is written out: flipped, planar, normalised.
struct Finish {
  bool planar = false, normalize = false;
  std::array<float, 3> mean{}, inv_std{};
};

struct Rows {
  std::vector<uint8_t> pixels;  // decoded rows, `stride` bytes each
  std::vector<uint8_t> resized;  // the window resized, HWC, before Finish
  int64_t stride = 0;
};

// Writes the (oh, ow, 3) uint8 image `in` to `out`: mirrored if `mirror`, in the layout
// and type `f` asks for.
template <typename T>
void WriteOut(const uint8_t *in, int oh, int ow, bool mirror, const Finish &f, T *out) {
  const int64_t plane = int64_t(oh) * ow;
  for (int y = 0; y < oh; y++) {
    const uint8_t *row = in + int64_t(y) * ow * 3;
    for (int x = 0; x < ow; x++) {
      const uint8_t *px = row + int64_t(mirror ? ow - 1 - x : x) * 3;
      for (int c = 0; c < 3; c++) {
        T v;
        if constexpr (std::is_same_v<T, float>)
          v = (float(px[c]) - f.mean[c]) * f.inv_std[c];
        else
          v = px[c];
        if (f.planar)
          out[c * plane + int64_t(y) * ow + x] = v;
        else
          out[(int64_t(y) * ow + x) * 3 + c] = v;
      }
    }
  }
}

// The DCT reduction for a window: the largest f <= max_factor with the window at least f
// times the output on both axes (jpeg_scale.dct_factors' rule per axis), else 1.
int Factor(const Job &j) {
  int f = 1;
  for (int cand = 2; cand <= j.max_factor && cand <= 8; cand *= 2)
    if (j.height >= cand * j.oh && j.width >= cand * j.ow) f = cand;
  return f;
}

// Decodes the rows and columns holding the window (plus a pixel of margin) at 1/f and
// resizes the window into `out` (oh, ow, 3). Returns "" or libjpeg's error message.
std::string DecodeCropResize(const uint8_t *data, int64_t size, const Job &j, uint8_t *out,
                             Rows &r) {
  Decoder &d = ThreadDecoder();
  jpeg_decompress_struct &c = d.cinfo;
  if (setjmp(d.err.jump)) {
    jpeg_abort_decompress(&c);
    return d.err.message;
  }
  jpeg_mem_src(&c, data, static_cast<unsigned long>(size));  // NOLINT(runtime/int)
  jpeg_read_header(&c, TRUE);
  if (!Supported(c)) {
    jpeg_abort_decompress(&c);
    return "not an 8-bit grey, YCbCr or RGB JPEG";
  }
  const int f = Factor(j);
  c.scale_num = 1;
  c.scale_denom = f;
  c.out_color_space = JCS_RGB;
  c.dct_method = j.fast_idct ? JDCT_IFAST : JDCT_ISLOW;
  c.do_fancy_upsampling = TRUE;
  jpeg_start_decompress(&c);
  const int dh = c.output_height, dw = c.output_width;
  // the window in decoded pixels, and the whole pixels holding it (a box)
  const double y0 = double(j.top) / f, x0 = double(j.left) / f;
  const double y1 = double(j.top + j.height) / f, x1 = double(j.left + j.width) / f;
  const int by0 = int(std::floor(y0)), bx0 = int(std::floor(x0));
  const int by1 = std::min(int(std::ceil(y1)), dh), bx1 = std::min(int(std::ceil(x1)), dw);
  if (by0 < 0 || bx0 < 0 || by1 <= by0 || bx1 <= bx0) {
    jpeg_abort_decompress(&c);
    return "the crop window lies outside the image";
  }
  // columns: one pixel of margin, widened by libjpeg to iMCU boundaries
  JDIMENSION xoff = std::max(bx0 - 1, 0), cw = std::min(bx1 + 1, dw) - int(xoff);
  jpeg_crop_scanline(&c, &xoff, &cw);
  const int ry0 = std::max(by0 - 1, 0), ry1 = std::min(by1 + 1, dh);
  if (ry0 > 0) jpeg_skip_scanlines(&c, ry0);
  r.stride = int64_t(c.output_width) * 3;
  r.pixels.resize(size_t(ry1 - ry0) * r.stride);
  while (int(c.output_scanline) < ry1) {
    JSAMPROW row = r.pixels.data() + (int64_t(c.output_scanline) - ry0) * r.stride;
    jpeg_read_scanlines(&c, &row, 1);
  }
  jpeg_abort_decompress(&c);  // the rows below the window are never decoded
  const uint8_t *box = r.pixels.data() + (by0 - ry0) * r.stride + (bx0 - int(xoff)) * 3;
  Plan p{j.oh, j.ow, y0 - by0, x0 - bx0, y1 - by0, x1 - bx0};
  ResizeSample(box, 1, by1 - by0, bx1 - bx0, 3, out, p, j.filter, j.antialias, r.stride);
  return "";
}

}  // namespace

class DpJpegDecodable : public ::dali::Operator<CPU> {
 public:
  explicit DpJpegDecodable(const ::dali::OpSpec &spec) : ::dali::Operator<CPU>(spec) {}

 protected:
  bool SetupImpl(std::vector<::dali::OutputDesc> &output_desc,
                 const ::dali::Workspace &ws) override {
    const auto &files = ws.Input<CPU>(0);
    DALI_ENFORCE(files.type() == DALI_UINT8, "DpJpegDecodable: input 0 must be uint8 bytes");
    output_desc.resize(1);
    output_desc[0].type = DALI_BOOL;
    output_desc[0].shape = ::dali::uniform_list_shape(files.num_samples(),
                                                      ::dali::TensorShape<>{});
    return true;
  }

  void RunImpl(::dali::Workspace &ws) override {
    const auto &files = ws.Input<CPU>(0);
    auto &out = ws.Output<CPU>(0);
    auto &tp = ws.GetThreadPool();
    for (int s = 0; s < files.num_samples(); s++)
      tp.AddWork([&, s](int) {
        *out.mutable_tensor<bool>(s) = Decodable(files.tensor<uint8_t>(s),
                                                 files.shape().tensor_size(s));
      }, 1);
    tp.RunAll();
  }
};

class DpDecodeCropResize : public DpOp {
 public:
  explicit DpDecodeCropResize(const ::dali::OpSpec &spec)
      : DpOp(spec), filter_(spec.GetArgument<int>("filter")),
        antialias_(spec.GetArgument<bool>("antialias")),
        fast_idct_(spec.GetArgument<bool>("fast_idct")),
        max_factor_(spec.GetArgument<int>("max_dct_factor")) {
    auto layout = spec.GetArgument<std::string>("output_layout");
    DALI_ENFORCE(layout == "HWC" || layout == "CHW",
                 "DpDecodeCropResize: output_layout must be \"HWC\" or \"CHW\"");
    finish_.planar = layout == "CHW";
    auto mean = spec.GetRepeatedArgument<float>("mean");
    auto std = spec.GetRepeatedArgument<float>("std");
    DALI_ENFORCE(mean.size() == std.size() && (mean.empty() || mean.size() == 3),
                 "DpDecodeCropResize: give mean and std together, three values each");
    finish_.normalize = !mean.empty();
    for (size_t c = 0; c < mean.size(); c++) {
      DALI_ENFORCE(std[c] > 0, "DpDecodeCropResize: std must be positive");
      finish_.mean[c] = mean[c];
      finish_.inv_std[c] = 1.f / std[c];
    }
    auto size = spec.GetRepeatedArgument<int>("size");
    DALI_ENFORCE(size.empty() || size.size() == 2,
                 "DpDecodeCropResize: size must be (height, width)");
    if (size.size() == 2) size_ = {size[0], size[1]};
    DALI_ENFORCE(filter_ == kTriangle || filter_ == kCubic,
                 "DpDecodeCropResize: filter must be 0 (triangle) or 1 (cubic)");
    DALI_ENFORCE(max_factor_ == 1 || max_factor_ == 2 || max_factor_ == 4 || max_factor_ == 8,
                 "DpDecodeCropResize: max_dct_factor must be 1, 2, 4 or 8");
  }

 protected:
  bool SetupImpl(std::vector<::dali::OutputDesc> &output_desc,
                 const ::dali::Workspace &ws) override {
    const auto &files = ws.Input<CPU>(0);
    DALI_ENFORCE(files.type() == DALI_UINT8, "DpDecodeCropResize: input 0 must be uint8");
    DALI_ENFORCE(ws.NumInput() == 4 || size_.size() == 2,
                 "DpDecodeCropResize: give the output size as input 3 or the size argument");
    int n = files.num_samples();
    ::dali::TensorListShape<> shape(n, 3);
    jobs_.resize(n);
    for (int s = 0; s < n; s++) {
      jobs_[s] = MakeJob(ws, s);
      const int oh = jobs_[s].oh, ow = jobs_[s].ow;
      shape.set_tensor_shape(s, finish_.planar ? ::dali::TensorShape<>{3, oh, ow}
                                               : ::dali::TensorShape<>{oh, ow, 3});
    }
    output_desc.resize(1);
    output_desc[0].type = finish_.normalize ? DALI_FLOAT : DALI_UINT8;
    output_desc[0].shape = shape;
    return true;
  }

  void RunImpl(::dali::Workspace &ws) override {
    const auto &files = ws.Input<CPU>(0);
    auto &output = ws.Output<CPU>(0);
    std::vector<std::string> errors(files.num_samples());
    auto cost = [&](int s) { return int64_t(jobs_[s].height) * jobs_[s].width; };
    // the resize writes the output itself unless it is flipped, planar or normalised
    const bool plain = !finish_.planar && !finish_.normalize;
    ForEachSample(ws, cost, [&](int s) {
      thread_local Rows rows;
      const Job &j = jobs_[s];
      const bool direct = plain && !j.mirror;
      if (!direct) rows.resized.resize(size_t(j.oh) * j.ow * 3);
      uint8_t *resized = direct ? output.mutable_tensor<uint8_t>(s) : rows.resized.data();
      errors[s] = DecodeCropResize(files.tensor<uint8_t>(s), files.shape().tensor_size(s),
                                   j, resized, rows);
      if (direct || !errors[s].empty()) return;
      if (finish_.normalize)
        WriteOut(resized, j.oh, j.ow, j.mirror, finish_, output.mutable_tensor<float>(s));
      else
        WriteOut(resized, j.oh, j.ow, j.mirror, finish_, output.mutable_tensor<uint8_t>(s));
    });
    output.SetLayout(finish_.planar ? "CHW" : "HWC");
    for (int s = 0; s < files.num_samples(); s++)
      DALI_ENFORCE(errors[s].empty(), ::dali::make_string(
          "DpDecodeCropResize: sample ", s, ": libjpeg-turbo could not decode it: ",
          errors[s]));
  }

 private:
  Job MakeJob(const ::dali::Workspace &ws, int s) const {
    auto pair = [&](int i, const char *what) {
      const auto &t = ws.Input<CPU>(i);
      DALI_ENFORCE(t.type() == DALI_INT32 && t.shape().tensor_size(s) == 2,
                   ::dali::make_string("DpDecodeCropResize: sample ", s, " needs an int32 (2,) ",
                                       what));
      return std::array<int, 2>{t.tensor<int>(s)[0], t.tensor<int>(s)[1]};
    };
    auto anchor = pair(1, "window anchor"), extent = pair(2, "window shape");
    std::array<int, 2> out = {size_.empty() ? 0 : size_[0], size_.empty() ? 0 : size_[1]};
    if (ws.NumInput() == 4) {
      const auto &t = ws.Input<CPU>(3);
      DALI_ENFORCE(t.shape().tensor_size(s) == 2 &&
                   (t.type() == DALI_INT32 || t.type() == DALI_FLOAT),
                   ::dali::make_string("DpDecodeCropResize: sample ", s, " needs a (2,) size"));
      for (int k = 0; k < 2; k++)
        out[k] = t.type() == DALI_INT32 ? t.tensor<int>(s)[k]
                                        : int(std::lround(t.tensor<float>(s)[k]));
    }
    DALI_ENFORCE(out[0] >= 1 && out[1] >= 1 && out[0] <= 65536 && out[1] <= 65536,
                 ::dali::make_string("DpDecodeCropResize: sample ", s, " output size ", out[0],
                                     "x", out[1], " is outside 1..65536"));
    DALI_ENFORCE(anchor[0] >= 0 && anchor[1] >= 0 && extent[0] >= 1 && extent[1] >= 1,
                 ::dali::make_string("DpDecodeCropResize: sample ", s, " window (", anchor[0],
                                     ", ", anchor[1], ", ", extent[0], ", ", extent[1],
                                     ") is empty or starts before the image"));
    return Job{anchor[0], anchor[1], extent[0], extent[1], out[0], out[1], max_factor_,
               filter_, antialias_, fast_idct_, spec_.GetArgument<int>("mirror", &ws, s) != 0};
  }

  int filter_;
  bool antialias_, fast_idct_;
  int max_factor_;
  Finish finish_;
  std::vector<int> size_;
  std::vector<Job> jobs_;
};

}  // namespace dali_pipes

DP_REGISTER_OPERATOR(DpDecodeCropResize);
DP_REGISTER_OPERATOR(DpJpegDecodable);

DALI_SCHEMA(DpDecodeCropResize)
    .DocStr("dali_pipes: a JPEG's crop window decoded with libjpeg-turbo's partial decoding "
            "(optionally at a reduced DCT scale) and resized (antialiased, PIL's scheme)")
    .NumInput(3, 4)
    .NumOutput(1)
    .AddOptionalArg("size", "output (height, width) when no input 3 gives it",
                    std::vector<int>{})
    .AddOptionalArg("filter", "0: triangle (bilinear), 1: cubic a = -0.5 (bicubic)", 0)
    .AddOptionalArg("antialias", "widen the filter by the downscale factor", true)
    .AddOptionalArg("fast_idct", "libjpeg-turbo's fast integer IDCT", false)
    .AddOptionalArg("max_dct_factor", "largest DCT reduction (1: full scale only; 2, 4, 8)",
                    1)
    .AddOptionalArg("mirror", "per sample: flip the output horizontally", 0, true)
    .AddOptionalArg("output_layout", "\"HWC\" or \"CHW\"", std::string("HWC"))
    .AddOptionalArg("mean", "per-channel mean (0..255 scale); with std: float32 output",
                    std::vector<float>{})
    .AddOptionalArg("std", "per-channel standard deviation (0..255 scale)",
                    std::vector<float>{});

DALI_SCHEMA(DpJpegDecodable)
    .DocStr("dali_pipes: whether DpDecodeCropResize decodes each file (an 8-bit grey, YCbCr "
            "or RGB JPEG whose header libjpeg reads)")
    .NumInput(1)
    .NumOutput(1);
