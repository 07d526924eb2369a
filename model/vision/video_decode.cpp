#include "model/vision/video_decode.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "model/vision/ffmpeg_library.h"

namespace ds::vision {

namespace {

using Clock = std::chrono::steady_clock;

// decode_video loads the table before anything here runs.
const FFmpeg& ff() { return ffmpeg(); }

// Only demuxers and decoders for video files people send: no playlist or image-sequence
// demuxer (hls, concat, image2 would open other files or URLs), no exotic decoders.
constexpr const char* kFormats = "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,mpegts,ogg,flv";
constexpr const char* kCodecs =
    "h264,hevc,vp8,vp9,av1,libdav1d,libaom-av1,mpeg4,mpeg1video,mpeg2video,mjpeg,theora,h263";
constexpr int kIoBuffer = 64 << 10;

[[noreturn]] void fail(const std::string& what) { throw ImageError(what); }

std::string av_error(int code) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  ff().av_strerror(code, buf, sizeof buf);
  return buf;
}

// The bytes as an AVIOContext source (read and seek, AVSEEK_SIZE included).
struct MemoryReader {
  std::span<const uint8_t> data;
  int64_t pos = 0;

  static int read(void* opaque, uint8_t* buf, int size) {
    auto* r = static_cast<MemoryReader*>(opaque);
    const int64_t left = static_cast<int64_t>(r->data.size()) - r->pos;
    if (left <= 0) return AVERROR_EOF;
    const int n = static_cast<int>(std::min<int64_t>(size, left));
    std::memcpy(buf, r->data.data() + r->pos, static_cast<size_t>(n));
    r->pos += n;
    return n;
  }
  static int64_t seek(void* opaque, int64_t offset, int whence) {
    auto* r = static_cast<MemoryReader*>(opaque);
    const auto size = static_cast<int64_t>(r->data.size());
    switch (whence & ~AVSEEK_FORCE) {
      case AVSEEK_SIZE: return size;
      case SEEK_SET: break;
      case SEEK_CUR: offset += r->pos; break;
      case SEEK_END: offset += size; break;
      default: return AVERROR(EINVAL);
    }
    if (offset < 0 || offset > size) return AVERROR(EINVAL);
    r->pos = offset;
    return offset;
  }
};

struct Deadline {
  Clock::time_point at;
  static int interrupt(void* opaque) { return Clock::now() > static_cast<Deadline*>(opaque)->at ? 1 : 0; }
};

struct FormatCloser {
  void operator()(AVFormatContext* f) const { ff().avformat_close_input(&f); }
};
struct IoCloser {
  void operator()(AVIOContext* io) const {
    if (io) ff().av_freep(&io->buffer);
    ff().avio_context_free(&io);
  }
};
struct CodecCloser {
  void operator()(AVCodecContext* c) const { ff().avcodec_free_context(&c); }
};
struct PacketCloser {
  void operator()(AVPacket* p) const { ff().av_packet_free(&p); }
};
struct FrameCloser {
  void operator()(AVFrame* f) const { ff().av_frame_free(&f); }
};
struct SwsCloser {
  void operator()(SwsContext* s) const { ff().sws_freeContext(s); }
};

void check_time(const Deadline& d, const VideoLimits& limits) {
  if (Clock::now() > d.at)
    fail("the video took longer than " + std::to_string(limits.max_time.count()) + " ms to decode");
}

// One demuxer over the bytes (each pass opens its own: the first pass's reading position and
// state are not reused).
class Demuxer {
 public:
  Demuxer(std::span<const uint8_t> data, Deadline& deadline, const VideoLimits& limits) : reader_{data, 0} {
    auto* buf = static_cast<uint8_t*>(ff().av_malloc(kIoBuffer));
    if (!buf) fail("out of memory opening the video");
    io_.reset(ff().avio_alloc_context(buf, kIoBuffer, 0, &reader_, &MemoryReader::read, nullptr, &MemoryReader::seek));
    if (!io_) {
      ff().av_free(buf);
      fail("out of memory opening the video");
    }
    AVFormatContext* f = ff().avformat_alloc_context();
    if (!f) fail("out of memory opening the video");
    f->pb = io_.get();
    f->flags |= AVFMT_FLAG_CUSTOM_IO;
    f->interrupt_callback = {&Deadline::interrupt, &deadline};
    f->probesize = std::min<int64_t>(static_cast<int64_t>(data.size()), int64_t{5} << 20);
    f->max_analyze_duration = 5 * AV_TIME_BASE;
    AVDictionary* opts = nullptr;
    ff().av_dict_set(&opts, "format_whitelist", kFormats, 0);
    ff().av_dict_set(&opts, "codec_whitelist", kCodecs, 0);
    const int rc = ff().avformat_open_input(&f, nullptr, nullptr, &opts);  // frees f on failure
    ff().av_dict_free(&opts);
    if (rc < 0) check_time(deadline, limits);  // the interrupt callback ended it
    if (rc < 0)
      fail("the data is not a video in a supported container (MP4 / MOV, WebM / Matroska, AVI, MPEG-TS, Ogg, "
           "FLV): " + av_error(rc));
    fmt_.reset(f);
    if (const int r = ff().avformat_find_stream_info(f, nullptr); r < 0) {
      check_time(deadline, limits);
      fail("the video's streams could not be read: " + av_error(r));
    }
    stream_ = ff().av_find_best_stream(f, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
    if (stream_ < 0) fail("the file has no video stream");
    const AVCodecParameters* par = f->streams[stream_]->codecpar;
    if (par->width <= 0 || par->height <= 0)
      fail("the video stream has no frame size (" + std::to_string(par->width) + "x" + std::to_string(par->height) + ")");
    if (par->width > limits.max_side || par->height > limits.max_side)
      fail("video frames of " + std::to_string(par->width) + "x" + std::to_string(par->height) +
           " pixels: each side may be at most " + std::to_string(limits.max_side));
    if (int64_t{par->width} * par->height > limits.max_pixels)
      fail("video frames of " + std::to_string(par->width) + "x" + std::to_string(par->height) +
           " pixels: at most " + std::to_string(limits.max_pixels) + " pixels a frame are allowed");
  }

  AVFormatContext* fmt() const { return fmt_.get(); }
  int stream() const { return stream_; }
  const AVStream* av_stream() const { return fmt_->streams[stream_]; }

 private:
  MemoryReader reader_;
  std::unique_ptr<AVIOContext, IoCloser> io_;
  std::unique_ptr<AVFormatContext, FormatCloser> fmt_;  // declared after io_: closed first
  int stream_ = -1;
};

double frame_rate(const AVStream* s) {
  for (AVRational r : {s->avg_frame_rate, s->r_frame_rate})
    if (r.num > 0 && r.den > 0) return av_q2d(r);
  return 0;
}

// Pass 1: the stream's frames (packets), within the limits.
VideoStreamInfo probe(std::span<const uint8_t> data, Deadline& deadline, const VideoLimits& limits) {
  Demuxer dm(data, deadline, limits);
  VideoStreamInfo info;
  int64_t cut_packets = 0;
  const AVCodecParameters* par = dm.av_stream()->codecpar;
  info.width = par->width;
  info.height = par->height;
  info.fps = frame_rate(dm.av_stream());
  std::unique_ptr<AVPacket, PacketCloser> pkt(ff().av_packet_alloc());
  if (!pkt) fail("out of memory reading the video");
  for (;;) {
    const int rc = ff().av_read_frame(dm.fmt(), pkt.get());
    if (rc == AVERROR_EOF) break;
    check_time(deadline, limits);
    if (rc < 0) fail("the video's data is truncated or damaged: " + av_error(rc));
    const bool ours = pkt->stream_index == dm.stream();
    const bool corrupt = (pkt->flags & AV_PKT_FLAG_CORRUPT) != 0;
    // An edit list can cut frames (MP4s with B-frames often do): the decoder decodes such a
    // packet but shows no frame for it, so it is not one of the video's frames.
    const bool cut = (pkt->flags & AV_PKT_FLAG_DISCARD) != 0;
    ff().av_packet_unref(pkt.get());
    if (!ours) continue;
    if (cut) {
      ++cut_packets;
      continue;
    }
    if (corrupt)
      fail("the video's data is truncated or damaged (a corrupt packet at frame " + std::to_string(info.total_frames) + ")");
    if (++info.total_frames > limits.max_frames)
      fail("the video has more than " + std::to_string(limits.max_frames) + " frames");
  }
  if (info.total_frames == 0) fail("the video stream has no frames");
  // A container that lists its frames (MP4's sample tables) and holds fewer was cut short.
  if (const int64_t listed = dm.av_stream()->nb_frames; listed > info.total_frames + cut_packets)
    fail("the video ended after " + std::to_string(info.total_frames) + " of its " + std::to_string(listed) +
         " frames (truncated or damaged)");
  if (info.fps > 0 && static_cast<double>(info.total_frames) / info.fps > limits.max_seconds)
    fail("the video is " + std::to_string(static_cast<int64_t>(static_cast<double>(info.total_frames) / info.fps)) +
         " s long; at most " + std::to_string(static_cast<int64_t>(limits.max_seconds)) + " s are allowed");
  return info;
}

}  // namespace

DecodedVideo decode_video(std::span<const uint8_t> data, const VideoLimits& limits, const FrameChooser& choose,
                          const FrameTransform& transform) {
  ffmpeg();  // throws (a 400 in serve) where FFmpeg is not installed
  static std::once_flag quiet;
  // FFmpeg logs every damaged packet on stderr; the refusal says what went wrong instead.
  std::call_once(quiet, [] { ff().av_log_set_level(AV_LOG_QUIET); });
  if (data.empty()) fail("the video is empty (0 bytes)");
  if (static_cast<int64_t>(data.size()) > limits.max_bytes)
    fail("the video is " + std::to_string(data.size()) + " bytes; at most " + std::to_string(limits.max_bytes) +
         " are allowed");
  Deadline deadline{Clock::now() + limits.max_time};
  DecodedVideo out;
  out.info = probe(data, deadline, limits);
  out.indices = choose(out.info);
  for (size_t i = 0; i < out.indices.size(); ++i)
    if (out.indices[i] < 0 || out.indices[i] >= out.info.total_frames || (i && out.indices[i] < out.indices[i - 1]))
      fail("internal: frame indices out of order or range");
  out.frames.resize(out.indices.size());

  // Pass 2: decode everything, keep the chosen frames.
  Demuxer dm(data, deadline, limits);
  const AVCodecParameters* par = dm.av_stream()->codecpar;
  const AVCodec* codec = ff().avcodec_find_decoder(par->codec_id);
  if (!codec) fail(std::string("the video's codec (") + ff().avcodec_get_name(par->codec_id) + ") cannot be decoded here");
  std::unique_ptr<AVCodecContext, CodecCloser> cx(ff().avcodec_alloc_context3(codec));
  if (!cx) fail("out of memory opening the video decoder");
  if (ff().avcodec_parameters_to_context(cx.get(), par) < 0) fail("the video's codec parameters are invalid");
  cx->thread_count = std::max(1, limits.threads);
  cx->max_pixels = limits.max_pixels;
  cx->err_recognition |= AV_EF_EXPLODE;
  AVDictionary* opts = nullptr;
  ff().av_dict_set(&opts, "codec_whitelist", kCodecs, 0);
  const int orc = ff().avcodec_open2(cx.get(), codec, &opts);
  ff().av_dict_free(&opts);
  if (orc < 0)
    fail(std::string("the video's codec (") + ff().avcodec_get_name(par->codec_id) + ") is not supported: " + av_error(orc));

  std::unique_ptr<AVPacket, PacketCloser> pkt(ff().av_packet_alloc());
  std::unique_ptr<AVFrame, FrameCloser> frame(ff().av_frame_alloc());
  if (!pkt || !frame) fail("out of memory decoding the video");
  std::unique_ptr<SwsContext, SwsCloser> sws;
  std::vector<uint8_t> staging;  // one RGB frame with padded rows (see below)
  int64_t decoded = 0;
  size_t next = 0;  // the next index to fill
  auto take_frames = [&]() {
    for (;;) {
      const int rc = ff().avcodec_receive_frame(cx.get(), frame.get());
      if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return;
      if (rc < 0) fail("the video's data is damaged at frame " + std::to_string(decoded) + ": " + av_error(rc));
      check_time(deadline, limits);
      if ((frame->flags & AV_FRAME_FLAG_CORRUPT) || frame->decode_error_flags)
        fail("the video's data is damaged at frame " + std::to_string(decoded));
      if (frame->width != out.info.width || frame->height != out.info.height)
        fail("the video changes frame size mid-stream (" + std::to_string(out.info.width) + "x" +
             std::to_string(out.info.height) + " to " + std::to_string(frame->width) + "x" +
             std::to_string(frame->height) + ")");
      if (next < out.indices.size() && out.indices[next] == decoded) {
        const auto fmt = static_cast<AVPixelFormat>(frame->format);
        sws.reset(ff().sws_getCachedContext(sws.release(), frame->width, frame->height, fmt, frame->width, frame->height,
                                       AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr));
        if (!sws) fail(std::string("the video's pixel format (") + (ff().av_get_pix_fmt_name(fmt) ? ff().av_get_pix_fmt_name(fmt) : "?") +
                       ") cannot be converted to RGB");
        // swscale's SIMD writes whole vectors past a row's end: convert into rows padded to
        // 64 bytes (and a spare row), then copy the pixels out.
        const int row = frame->width * 3, padded = (row + 63) / 64 * 64;
        staging.resize(static_cast<size_t>(padded) * static_cast<size_t>(frame->height + 1));
        uint8_t* dst[4] = {staging.data(), nullptr, nullptr, nullptr};
        const int stride[4] = {padded, 0, 0, 0};
        if (ff().sws_scale(sws.get(), frame->data, frame->linesize, 0, frame->height, dst, stride) != frame->height)
          fail("the video's frame " + std::to_string(decoded) + " could not be converted to RGB");
        RgbImage rgb(frame->width, frame->height);
        for (int y = 0; y < frame->height; ++y)
          std::memcpy(rgb.row(y), staging.data() + static_cast<size_t>(y) * static_cast<size_t>(padded),
                      static_cast<size_t>(row));
        out.frames[next] =
            transform ? transform(std::move(rgb), out.info, static_cast<int64_t>(out.indices.size())) : std::move(rgb);
        // A chosen index named twice gets the same frame.
        for (++next; next < out.indices.size() && out.indices[next] == decoded; ++next) out.frames[next] = out.frames[next - 1];
      }
      ff().av_frame_unref(frame.get());
      ++decoded;
    }
  };
  for (;;) {
    const int rc = ff().av_read_frame(dm.fmt(), pkt.get());
    if (rc == AVERROR_EOF) break;
    check_time(deadline, limits);
    if (rc < 0) fail("the video's data is damaged: " + av_error(rc));
    if (pkt->stream_index == dm.stream()) {
      const int src = ff().avcodec_send_packet(cx.get(), pkt.get());
      ff().av_packet_unref(pkt.get());
      if (src < 0 && src != AVERROR(EAGAIN))
        fail("the video's data is damaged at frame " + std::to_string(decoded) + ": " + av_error(src));
      take_frames();
      if (next == out.indices.size()) break;  // everything chosen is in hand
    } else {
      ff().av_packet_unref(pkt.get());
    }
  }
  if (next < out.indices.size()) {
    if (ff().avcodec_send_packet(cx.get(), nullptr) >= 0) take_frames();  // drain the decoder
  }
  if (next < out.indices.size())
    fail("the video ended after " + std::to_string(decoded) + " of its " + std::to_string(out.info.total_frames) +
         " frames (truncated or damaged)");
  return out;
}

DecodedVideo decode_rgb24(std::span<const uint8_t> raw, const VideoStreamInfo& info, const FrameChooser& choose,
                          const FrameTransform& transform) {
  const int64_t frame_bytes = info.width * info.height * 3;
  if (info.width <= 0 || info.height <= 0 || info.total_frames <= 0 ||
      static_cast<int64_t>(raw.size()) != frame_bytes * info.total_frames)
    fail("raw RGB24 frames: " + std::to_string(raw.size()) + " bytes are not " + std::to_string(info.total_frames) +
         " frames of " + std::to_string(info.width) + "x" + std::to_string(info.height));
  DecodedVideo out;
  out.info = info;
  out.indices = choose(info);
  for (const int64_t k : out.indices) {
    if (k < 0 || k >= info.total_frames) fail("internal: frame index out of range");
    RgbImage rgb(info.width, info.height);
    std::memcpy(rgb.rgb.data(), raw.data() + k * frame_bytes, static_cast<size_t>(frame_bytes));
    out.frames.push_back(transform ? transform(std::move(rgb), info, static_cast<int64_t>(out.indices.size()))
                                   : std::move(rgb));
  }
  return out;
}

std::string video_decoder_status() { return ffmpeg_status(); }

}  // namespace ds::vision
