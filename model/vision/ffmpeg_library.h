// ffmpeg(): FFmpeg's C API (libavutil, libavcodec, libavformat, libswscale), opened at run time
// with dlopen instead of linked.
//
// Why: Debian's libavcodec alone pulls in about 130 codec, font and network libraries. Linked,
// they would be needed to start serve, refcheck and every test binary, even where no video ever
// arrives (a text or image deployment, a GPU machine that lacks them). Opened on the first
// video, they are needed only by video: serve checks at start-up (ffmpeg_status) and, where
// they are missing, turns video off with the reason, which a request with a video gets in its
// 400.
//
// The libraries opened are the major versions of the headers compiled against (their SONAMEs,
// libavcodec.so.<LIBAVCODEC_VERSION_MAJOR> and so on): the structs this code reads are laid out
// as those headers say. Each function is typed by its own declaration (decltype), so a call
// through the table is checked as a direct call would be.
#pragma once

#include <string>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/error.h>
#include <libavutil/frame.h>
#include <libavutil/log.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
}

namespace ds::vision {

// Every FFmpeg function the project calls: (library, function).
#define DS_FFMPEG_FUNCTIONS(X)                                                                           \
  X(avutil, av_strerror) X(avutil, av_malloc) X(avutil, av_free) X(avutil, av_freep)                  \
  X(avutil, av_dict_set) X(avutil, av_dict_free) X(avutil, av_log_set_level) X(avutil, av_d2q)        \
  X(avutil, av_frame_alloc) X(avutil, av_frame_free) X(avutil, av_frame_unref)                        \
  X(avutil, av_frame_get_buffer) X(avutil, av_frame_make_writable) X(avutil, av_get_pix_fmt_name)     \
  X(avcodec, av_packet_alloc) X(avcodec, av_packet_free) X(avcodec, av_packet_unref)                  \
  X(avcodec, av_packet_rescale_ts) X(avcodec, avcodec_find_decoder) X(avcodec, avcodec_find_encoder)  \
  X(avcodec, avcodec_find_encoder_by_name) X(avcodec, avcodec_alloc_context3)                         \
  X(avcodec, avcodec_free_context) X(avcodec, avcodec_get_name) X(avcodec, avcodec_open2)             \
  X(avcodec, avcodec_parameters_to_context) X(avcodec, avcodec_parameters_from_context)               \
  X(avcodec, avcodec_send_packet) X(avcodec, avcodec_receive_frame) X(avcodec, avcodec_send_frame)    \
  X(avcodec, avcodec_receive_packet)                                                                   \
  X(avformat, avformat_alloc_context) X(avformat, avformat_open_input) X(avformat, avformat_close_input) \
  X(avformat, avformat_find_stream_info) X(avformat, av_find_best_stream) X(avformat, av_read_frame)  \
  X(avformat, avio_alloc_context) X(avformat, avio_context_free) X(avformat, avio_flush)              \
  X(avformat, avformat_alloc_output_context2) X(avformat, avformat_free_context)                      \
  X(avformat, avformat_new_stream) X(avformat, avformat_write_header)                                 \
  X(avformat, av_interleaved_write_frame) X(avformat, av_write_trailer)                               \
  X(swscale, sws_getCachedContext) X(swscale, sws_freeContext) X(swscale, sws_scale)

struct FFmpeg {
#define DS_FFMPEG_MEMBER(lib, fn) decltype(&::fn) fn = nullptr;
  DS_FFMPEG_FUNCTIONS(DS_FFMPEG_MEMBER)
#undef DS_FFMPEG_MEMBER
};

// The four SONAMEs, as one line for messages: "libavutil.so.57, libavcodec.so.59, ...".
std::string ffmpeg_sonames();

// Opens the libraries (once, the first call; thread-safe) and returns the table; throws
// ImageError naming the missing library or function and how to install them.
const FFmpeg& ffmpeg();

// Empty when ffmpeg() loads, else the reason it does not (what ffmpeg() would throw).
std::string ffmpeg_status();

// The loader behind ffmpeg(), with the SONAMEs to open (in the order avutil, avcodec, avformat,
// swscale): for the tests of a missing library. Fills `out`; returns the error, or "".
std::string load_ffmpeg(const std::string (&sonames)[4], FFmpeg& out);

}  // namespace ds::vision
