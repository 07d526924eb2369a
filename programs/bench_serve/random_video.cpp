#include "programs/bench_serve/random_video.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>

extern "C" {
#include <libavformat/version.h>
}

#include "model/vision/ffmpeg_library.h"

#include "programs/bench_serve/random_image.h"

namespace ds::bench {

namespace {

using vision::ffmpeg;
const vision::FFmpeg& ff() { return ffmpeg(); }

void check(int rc, const char* what) {
  if (rc < 0) {
    char buf[AV_ERROR_MAX_STRING_SIZE] = {};
    ff().av_strerror(rc, buf, sizeof buf);
    throw std::runtime_error(std::string("random_mp4: ") + what + ": " + buf);
  }
}

// avio's write callback takes a const buffer from libavformat 61 (FFmpeg 7) on.
#if LIBAVFORMAT_VERSION_MAJOR >= 61
using WriteBuffer = const uint8_t*;
#else
using WriteBuffer = uint8_t*;
#endif

// A growable in-memory output the MP4 muxer can seek in (it rewrites sizes at the end).
struct MemoryWriter {
  std::vector<uint8_t> data;
  int64_t pos = 0;
  static int write(void* opaque, WriteBuffer buf, int n) {
    auto* w = static_cast<MemoryWriter*>(opaque);
    if (w->data.size() < static_cast<size_t>(w->pos + n)) w->data.resize(static_cast<size_t>(w->pos + n));
    std::memcpy(w->data.data() + w->pos, buf, static_cast<size_t>(n));
    w->pos += n;
    return n;
  }
  static int64_t seek(void* opaque, int64_t off, int whence) {
    auto* w = static_cast<MemoryWriter*>(opaque);
    if (whence == AVSEEK_SIZE) return static_cast<int64_t>(w->data.size());
    if (whence == SEEK_CUR) off += w->pos;
    if (whence == SEEK_END) off += static_cast<int64_t>(w->data.size());
    if (off < 0) return AVERROR(EINVAL);
    w->pos = off;
    return off;
  }
};

}  // namespace

std::vector<uint8_t> random_mp4(int width, int height, double seconds, double fps, uint64_t seed) {
  if (width < 16 || height < 16 || width % 2 || height % 2) throw std::invalid_argument("random_mp4: sides must be even, >= 16");
  const int frames = std::max(1, static_cast<int>(std::lround(seconds * fps)));
  ff().av_log_set_level(AV_LOG_ERROR);  // libx264 reports its statistics at the info level
  const AVRational rate = ff().av_d2q(fps, 1001000);
  const AVCodec* codec = ff().avcodec_find_encoder_by_name("libx264");
  if (!codec) codec = ff().avcodec_find_encoder(AV_CODEC_ID_MPEG4);
  if (!codec) throw std::runtime_error("random_mp4: libavcodec has neither libx264 nor an MPEG-4 encoder");

  MemoryWriter out;
  auto* iobuf = static_cast<uint8_t*>(ff().av_malloc(1 << 16));
  AVIOContext* io = ff().avio_alloc_context(iobuf, 1 << 16, 1, &out, nullptr, &MemoryWriter::write, &MemoryWriter::seek);
  AVFormatContext* fmt = nullptr;
  check(ff().avformat_alloc_output_context2(&fmt, nullptr, "mp4", nullptr), "mp4 muxer");
  fmt->pb = io;
  fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
  AVCodecContext* cx = ff().avcodec_alloc_context3(codec);
  AVFrame* frame = ff().av_frame_alloc();
  AVPacket* pkt = ff().av_packet_alloc();
  struct Cleanup {
    AVFormatContext*& fmt;
    AVIOContext*& io;
    AVCodecContext*& cx;
    AVFrame*& frame;
    AVPacket*& pkt;
    ~Cleanup() {
      ff().av_packet_free(&pkt);
      ff().av_frame_free(&frame);
      ff().avcodec_free_context(&cx);
      ff().avformat_free_context(fmt);
      if (io) ff().av_freep(&io->buffer);
      ff().avio_context_free(&io);
    }
  } cleanup{fmt, io, cx, frame, pkt};

  cx->width = width;
  cx->height = height;
  cx->pix_fmt = AV_PIX_FMT_YUV420P;
  cx->time_base = av_inv_q(rate);
  cx->framerate = rate;
  cx->gop_size = static_cast<int>(std::lround(fps * 2));
  cx->max_b_frames = 2;
  cx->thread_count = 0;
  if (fmt->oformat->flags & AVFMT_GLOBALHEADER) cx->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  AVDictionary* opts = nullptr;
  if (std::strcmp(codec->name, "libx264") == 0) {
    ff().av_dict_set(&opts, "preset", "veryfast", 0);
    ff().av_dict_set(&opts, "crf", "26", 0);
  } else {
    cx->bit_rate = static_cast<int64_t>(width) * height * 2;
  }
  const int orc = ff().avcodec_open2(cx, codec, &opts);
  ff().av_dict_free(&opts);
  check(orc, "open the encoder");
  AVStream* st = ff().avformat_new_stream(fmt, nullptr);
  if (!st) throw std::runtime_error("random_mp4: out of memory");
  st->time_base = cx->time_base;
  st->avg_frame_rate = rate;
  check(ff().avcodec_parameters_from_context(st->codecpar, cx), "stream parameters");
  check(ff().avformat_write_header(fmt, nullptr), "write the header");

  frame->format = cx->pix_fmt;
  frame->width = width;
  frame->height = height;
  check(ff().av_frame_get_buffer(frame, 0), "frame buffer");
  constexpr int kTile = 32;
  const int tiles_x = width / kTile + 2, tiles_y = height / kTile + 2;
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL + 0x7f4a7c15ULL);
  std::vector<uint8_t> yuv(static_cast<size_t>(tiles_x) * tiles_y * 3);
  for (auto& c : yuv) c = static_cast<uint8_t>(16 + (rng() >> 56) % 224);
  auto drain = [&](bool flush) {
    check(ff().avcodec_send_frame(cx, flush ? nullptr : frame), "encode");
    for (;;) {
      const int rc = ff().avcodec_receive_packet(cx, pkt);
      if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return;
      check(rc, "encode");
      pkt->duration = 1;  // one frame; without it the muxer's edit list cuts the last frame
      ff().av_packet_rescale_ts(pkt, cx->time_base, st->time_base);
      pkt->stream_index = st->index;
      check(ff().av_interleaved_write_frame(fmt, pkt), "write a packet");
    }
  };
  for (int f = 0; f < frames; ++f) {
    check(ff().av_frame_make_writable(frame), "frame");
    for (int plane = 0; plane < 3; ++plane) {
      const int sub = plane == 0 ? 1 : 2;
      for (int y = 0; y < height / sub; ++y) {
        uint8_t* row = frame->data[plane] + static_cast<ptrdiff_t>(y) * frame->linesize[plane];
        const int ty = (y * sub) / kTile;
        for (int x = 0; x < width / sub; ++x) {
          const int tx = (x * sub + f) / kTile % tiles_x;  // scrolls one pixel a frame
          row[x] = yuv[(static_cast<size_t>(ty) * tiles_x + tx) * 3 + plane];
        }
      }
    }
    frame->pts = f;
    drain(false);
  }
  drain(true);
  check(ff().av_write_trailer(fmt), "write the trailer");
  ff().avio_flush(io);
  return std::move(out.data);
}

std::string mp4_data_url(const std::vector<uint8_t>& mp4) {
  // The base64 of jpeg_data_url, with the video's media type.
  const std::string jpeg = jpeg_data_url(mp4);
  return "data:video/mp4;base64," + jpeg.substr(jpeg.find(',') + 1);
}

}  // namespace ds::bench
