// Package viewer serves rlxsplat's web viewer: one page, a WebGL2 splat renderer written for it
// and embedded in the binary (web/), the scene in a compact quantised layout (encode.go), the
// dataset's cameras and photos for "snap to camera", and, during training, the live state
// (curve, preview, evaluation) with pause and resume (live.go).
//
// Safety: it binds to the loopback address unless told otherwise; no request path reaches the
// file system (the page is embedded, the scene and photos are in memory); a loopback server
// answers only requests whose Host names the loopback (so a web page elsewhere cannot reach it
// by DNS rebinding), and the training controls take only POSTs that carry the page's own header
// (which a cross-site form cannot send).
package viewer

import (
	"bytes"
	"compress/gzip"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/rlxsplat/rlxsplat/internal/io/quant"
	"image"
	"image/jpeg"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/io/imageio"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

//go:embed web
var webFS embed.FS

// ControlHeader must be present on the training controls' POSTs: browsers do not let another
// site's page add it without a CORS preflight, which this server never grants.
const ControlHeader = "X-Rlxsplat"

// View is one dataset view offered in the "snap to camera" list.
type View struct {
	Name   string
	Camera camera.Camera
	Photo  *imageio.Image // nil when the view has no photo
}

// Options configure a Server.
type Options struct {
	Title      string
	Views      []View
	Background [3]float32
	// Loopback says the server listens on a loopback address only, so it refuses requests
	// whose Host header names anything else.
	Loopback bool
	// Live is the training run's state, or nil for a static scene.
	Live *Live
}

// Server serves the page, the scene and (with Options.Live) the training's state.
type Server struct {
	opt Options
	mux *http.ServeMux

	mu      sync.Mutex
	scene   []byte // encoded; nil until the first SetScene
	sceneGz []byte // the same, gzipped, made on first request
	version int
	splats  int
	deg     int

	photoMu sync.Mutex
	photos  map[int][]byte
}

// New returns a server for opt; give it a scene with SetScene (or through Options.Live).
func New(opt Options) *Server {
	s := &Server{opt: opt, photos: map[int][]byte{}}
	if opt.Live != nil {
		opt.Live.srv = s
	}
	web, err := fs.Sub(webFS, "web")
	if err != nil {
		panic(err) // the embedded tree is part of the binary: this cannot fail at run time
	}
	m := http.NewServeMux()
	m.Handle("GET /{$}", asset(web, "index.html"))
	m.Handle("GET /viewer.js", asset(web, "viewer.js"))
	m.Handle("GET /sort.js", asset(web, "sort.js"))
	m.HandleFunc("GET /api/info", s.info)
	m.HandleFunc("GET /api/scene", s.sceneHandler)
	m.HandleFunc("GET /api/photo/{i}", s.photo)
	m.HandleFunc("GET /api/live", s.live)
	m.HandleFunc("GET /api/preview", s.preview)
	m.HandleFunc("POST /api/pause", s.control(true))
	m.HandleFunc("POST /api/resume", s.control(false))
	s.mux = m
	return s
}

// asset serves one embedded file; everything is read from the binary, never from disk.
func asset(web fs.FS, name string) http.Handler {
	data, err := fs.ReadFile(web, name)
	if err != nil {
		panic(err) // embedded at build time
	}
	ctype := "text/html; charset=utf-8"
	if strings.HasSuffix(name, ".js") {
		ctype = "text/javascript; charset=utf-8"
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(data)
	})
}

// SetScene encodes g at SH degree deg and serves it from now on. It runs on the caller's
// goroutine; the live observer calls it from its own.
func (s *Server) SetScene(g *splat.Gaussians, deg int) error {
	b, err := Encode(g, deg)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.scene, s.sceneGz = b, nil
	s.version++
	s.splats, s.deg = g.Len(), deg
	s.mu.Unlock()
	return nil
}

// SetLoopback makes the server refuse requests whose Host header does not name the loopback
// (a page elsewhere reaching it through DNS rebinding); call it before serving.
func (s *Server) SetLoopback(on bool) { s.opt.Loopback = on }

// ServeHTTP checks the Host header of a loopback server, then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.opt.Loopback && !loopbackHost(r.Host) {
		http.Error(w, "this viewer answers only on the loopback address", http.StatusMisdirectedRequest)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	s.mux.ServeHTTP(w, r)
}

func loopbackHost(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

type cameraJSON struct {
	Name   string     `json:"name"`
	Width  int        `json:"width"`
	Height int        `json:"height"`
	K      [4]float64 `json:"k"` // fx, fy, cx, cy in pixels
	R      [9]float64 `json:"r"` // world-to-camera rotation, row-major (x right, y down, z forward)
	T      [3]float64 `json:"t"`
	Photo  bool       `json:"photo"`
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	cams := make([]cameraJSON, len(s.opt.Views))
	for i, v := range s.opt.Views {
		c := v.Camera
		cams[i] = cameraJSON{Name: v.Name, Width: c.Width, Height: c.Height,
			K: [4]float64{c.Fx, c.Fy, c.Cx, c.Cy}, T: c.T, Photo: v.Photo != nil}
		for a := 0; a < 3; a++ {
			copy(cams[i].R[3*a:], c.R[a][:])
		}
	}
	s.mu.Lock()
	body := map[string]any{
		"title": s.opt.Title, "live": s.opt.Live != nil, "version": s.version, "splats": s.splats,
		"shDegree": s.deg, "background": s.opt.Background, "cameras": cams,
	}
	s.mu.Unlock()
	writeJSON(w, body)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b)
}

func (s *Server) sceneHandler(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	b, version := s.scene, s.version
	gz := s.sceneGz
	wantGz := strings.Contains(r.Header.Get("Accept-Encoding"), "gzip")
	if b != nil && wantGz && gz == nil {
		// Compressed once per version, under the lock so that two pages do not both do it.
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		zw.Write(b)
		zw.Close()
		gz, s.sceneGz = buf.Bytes(), buf.Bytes()
	}
	s.mu.Unlock()
	if b == nil {
		w.Header().Set("Retry-After", "2")
		http.Error(w, "no scene yet", http.StatusServiceUnavailable)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Scene-Version", strconv.Itoa(version))
	if wantGz {
		h.Set("Content-Encoding", "gzip")
		b = gz
	}
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.Write(b)
}

// photo serves view i's photo as a JPEG, made from the loaded image on first request.
func (s *Server) photo(w http.ResponseWriter, r *http.Request) {
	i, err := strconv.Atoi(r.PathValue("i"))
	if err != nil || i < 0 {
		http.Error(w, "photo index must be a non-negative integer", http.StatusBadRequest)
		return
	}
	if i >= len(s.opt.Views) || s.opt.Views[i].Photo == nil {
		http.Error(w, "no such photo", http.StatusNotFound)
		return
	}
	s.photoMu.Lock()
	b, ok := s.photos[i]
	if !ok {
		b, err = encodeJPEG(s.opt.Views[i].Photo)
		if err == nil {
			s.photos[i] = b
		}
	}
	s.photoMu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "image/jpeg")
	w.Header().Set("Cache-Control", "max-age=3600")
	w.Write(b)
}

func encodeJPEG(img *imageio.Image) ([]byte, error) {
	if img.W <= 0 || img.H <= 0 || len(img.RGB) != img.W*img.H*3 {
		return nil, fmt.Errorf("viewer: photo of %d×%d has %d values", img.W, img.H, len(img.RGB))
	}
	m := image.NewRGBA(image.Rect(0, 0, img.W, img.H))
	for i := 0; i < img.W*img.H; i++ {
		for c := 0; c < 3; c++ {
			m.Pix[4*i+c] = quant.Byte(float64(img.RGB[3*i+c]) * 255)
		}
		m.Pix[4*i+3] = 255
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: 90}); err != nil {
		return nil, fmt.Errorf("viewer: photo: %w", err)
	}
	return buf.Bytes(), nil
}

func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	if s.opt.Live == nil {
		http.Error(w, "not training: no live state", http.StatusNotFound)
		return
	}
	st := s.opt.Live.state()
	s.mu.Lock()
	st.SceneVersion = s.version
	s.mu.Unlock()
	writeJSON(w, st)
}

func (s *Server) preview(w http.ResponseWriter, r *http.Request) {
	var b []byte
	if s.opt.Live != nil {
		b = s.opt.Live.previewPNG()
	}
	if b == nil {
		http.Error(w, "no preview yet", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b)
}

func (s *Server) control(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.opt.Live == nil {
			http.Error(w, "not training: nothing to pause", http.StatusNotFound)
			return
		}
		if r.Header.Get(ControlHeader) == "" {
			http.Error(w, "missing "+ControlHeader+" header", http.StatusForbidden)
			return
		}
		s.opt.Live.SetPaused(pause)
		w.WriteHeader(http.StatusNoContent)
	}
}

// Listen opens the viewer's listener on host:port (port 0 picks a free one). It returns the
// page's URL and whether the address is loopback-only; any other address exposes the scene
// (and the training controls) to the network, which the caller must say loudly.
func Listen(host string, port int) (ln net.Listener, url string, loopback bool, err error) {
	if port < 0 || port > 65535 {
		return nil, "", false, fmt.Errorf("viewer: port %d outside 0..65535", port)
	}
	ln, err = net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, "", false, fmt.Errorf("viewer: %w", err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	loopback = addr.IP.IsLoopback()
	shown := host
	if shown == "" || addr.IP.IsUnspecified() {
		shown = "localhost"
	}
	return ln, "http://" + net.JoinHostPort(shown, strconv.Itoa(addr.Port)) + "/", loopback, nil
}

// Serve answers on ln until ctx ends, then shuts down, giving open requests a moment to finish.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("viewer: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := hs.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = hs.Close()
	}
	if serr := <-done; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("viewer: shutting down: %w", err)
	}
	return nil
}
