package viewer_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/io/imageio"
	"github.com/rlxsplat/rlxsplat/internal/splattest"
	"github.com/rlxsplat/rlxsplat/internal/train"
	"github.com/rlxsplat/rlxsplat/internal/viewer"
)

func testServer(t *testing.T, live *viewer.Live) (*viewer.Server, *httptest.Server) {
	t.Helper()
	photo := &imageio.Image{W: 4, H: 2, RGB: make([]float32, 4*2*3)}
	views := []viewer.View{
		{Name: "a.png", Camera: camera.Camera{Width: 4, Height: 2, Fx: 4, Fy: 4, Cx: 2, Cy: 1, R: [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}}, Photo: photo},
		{Name: "b.png", Camera: camera.Camera{Width: 4, Height: 2, Fx: 4, Fy: 4, Cx: 2, Cy: 1}},
	}
	srv := viewer.New(viewer.Options{Title: "t", Views: views, Loopback: true, Live: live})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return srv, hs
}

func do(t *testing.T, method, url string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	// The default transport would decompress gzip silently; the test wants to see it.
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func TestRoutes(t *testing.T) {
	srv, hs := testServer(t, nil)
	g := splattest.RandomScene(1, 50, 3, 1)
	if err := srv.SetScene(g, 3); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, path string
		hdr                map[string]string
		status             int
		ctype              string
	}{
		{"page", "GET", "/", nil, 200, "text/html"},
		{"script", "GET", "/viewer.js", nil, 200, "text/javascript"},
		{"worker", "GET", "/sort.js", nil, 200, "text/javascript"},
		{"info", "GET", "/api/info", nil, 200, "application/json"},
		{"scene", "GET", "/api/scene", nil, 200, "application/octet-stream"},
		{"photo", "GET", "/api/photo/0", nil, 200, "image/jpeg"},
		{"view without photo", "GET", "/api/photo/1", nil, 404, ""},
		{"photo out of range", "GET", "/api/photo/2", nil, 404, ""},
		{"photo index negative", "GET", "/api/photo/-1", nil, 400, ""},
		{"photo index not a number", "GET", "/api/photo/x", nil, 400, ""},
		{"photo index huge", "GET", "/api/photo/99999999999999999999", nil, 400, ""},
		{"no live state", "GET", "/api/live", nil, 404, ""},
		{"no preview", "GET", "/api/preview", nil, 404, ""},
		{"pause without training", "POST", "/api/pause", map[string]string{viewer.ControlHeader: "1"}, 404, ""},
		{"pause by GET", "GET", "/api/pause", nil, 405, ""},
		{"page by POST", "POST", "/", nil, 405, ""},
		{"unknown path", "GET", "/index.html", nil, 404, ""},
		{"embedded dir", "GET", "/web/index.html", nil, 404, ""},
		{"traversal", "GET", "/../../../../etc/passwd", nil, 404, ""},
		{"encoded traversal", "GET", "/%2e%2e/%2e%2e/etc/passwd", nil, 404, ""},
		{"traversal in photo", "GET", "/api/photo/..%2f..%2fgo.mod", nil, 400, ""},
		{"source file", "GET", "/server.go", nil, 404, ""},
		{"foreign host", "GET", "/", map[string]string{"Host": "evil.example:80"}, 421, ""},
		{"foreign host for the scene", "GET", "/api/scene", map[string]string{"Host": "rebind.example"}, 421, ""},
		{"localhost host", "GET", "/api/info", map[string]string{"Host": "localhost:1234"}, 200, "application/json"},
		{"ipv6 loopback host", "GET", "/api/info", map[string]string{"Host": "[::1]:1234"}, 200, "application/json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(t, tc.method, hs.URL+tc.path, tc.hdr)
			// A cleaned path may redirect first; it must never reach a file either way.
			if resp.StatusCode == http.StatusMovedPermanently || resp.StatusCode == http.StatusTemporaryRedirect {
				loc := resp.Header.Get("Location")
				resp, body = do(t, tc.method, hs.URL+loc, tc.hdr)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("%s %s: status %d, want %d (%s)", tc.method, tc.path, resp.StatusCode, tc.status, body)
			}
			if tc.ctype != "" && !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.ctype) {
				t.Errorf("content type %q, want %q", resp.Header.Get("Content-Type"), tc.ctype)
			}
			if bytes.Contains(body, []byte("root:")) || bytes.Contains(body, []byte("module github.com")) {
				t.Errorf("a file's content came back: %.80q", body)
			}
		})
	}
}

func TestSceneRoute(t *testing.T) {
	srv, hs := testServer(t, nil)
	if resp, _ := do(t, "GET", hs.URL+"/api/scene", nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("before any scene: status %d, want 503", resp.StatusCode)
	}
	g := splattest.RandomScene(7, 300, 2, 1)
	if err := srv.SetScene(g, 2); err != nil {
		t.Fatal(err)
	}
	want, _ := viewer.Encode(g, 2)
	resp, plain := do(t, "GET", hs.URL+"/api/scene", nil)
	if !bytes.Equal(plain, want) || resp.Header.Get("X-Scene-Version") != "1" {
		t.Fatalf("plain scene: %d bytes (want %d), version %q", len(plain), len(want), resp.Header.Get("X-Scene-Version"))
	}
	resp, gz := do(t, "GET", hs.URL+"/api/scene", map[string]string{"Accept-Encoding": "gzip"})
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatal("gzip was accepted but not used")
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	un, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(un, want) {
		t.Fatalf("gzipped scene does not decompress to the scene (%v)", err)
	}
	var info struct {
		Splats   int `json:"splats"`
		ShDegree int `json:"shDegree"`
		Cameras  []struct {
			Name  string    `json:"name"`
			K     []float64 `json:"k"`
			Photo bool      `json:"photo"`
		} `json:"cameras"`
	}
	_, b := do(t, "GET", hs.URL+"/api/info", nil)
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	if info.Splats != 300 || info.ShDegree != 2 || len(info.Cameras) != 2 || !info.Cameras[0].Photo || info.Cameras[1].Photo || info.Cameras[0].K[0] != 4 {
		t.Fatalf("info: %s", b)
	}
}

func TestLiveControls(t *testing.T) {
	live := viewer.NewLive(time.Hour)
	_, hs := testServer(t, live)
	if resp, _ := do(t, "POST", hs.URL+"/api/pause", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("pause without %s: status %d, want 403", viewer.ControlHeader, resp.StatusCode)
	}
	ctl := map[string]string{viewer.ControlHeader: "1"}
	if resp, _ := do(t, "POST", hs.URL+"/api/pause", ctl); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("pause: status %d", resp.StatusCode)
	}
	held := make(chan struct{})
	go func() { live.Hold(context.Background()); close(held) }()
	select {
	case <-held:
		t.Fatal("Hold returned while paused")
	case <-time.After(50 * time.Millisecond):
	}
	_, b := do(t, "GET", hs.URL+"/api/live", nil)
	if !strings.Contains(string(b), `"paused":true`) {
		t.Fatalf("live state while paused: %s", b)
	}
	if resp, _ := do(t, "POST", hs.URL+"/api/resume", ctl); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("resume: status %d", resp.StatusCode)
	}
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("Hold did not return after resume")
	}
	// A cancelled run is not held by a pause.
	live.SetPaused(true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	live.Hold(ctx)
	live.SetPaused(false)
}

func TestLiveState(t *testing.T) {
	live := viewer.NewLive(time.Hour)
	_, hs := testServer(t, live)
	for s := 1; s <= 10000; s++ {
		live.Event(train.Progress{Step: s, Total: 10000, Loss: 1 / float64(s), PSNR: 20, Gaussians: 7})
	}
	live.Event(train.Evaluated{Step: 10000, Split: "test", PSNR: 25.5, SSIM: 0.9})
	var st viewer.LiveState
	_, b := do(t, "GET", hs.URL+"/api/live", nil)
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Step != 10000 || !st.Done || st.Gaussians != 7 || len(st.Evals) != 1 || st.Evals[0].PSNR != 25.5 {
		t.Fatalf("state: %+v", st)
	}
	if n := len(st.Curve); n < 500 || n > 2000 || st.Curve[0][0] != 1 {
		t.Fatalf("curve of %d points starting at %v: want 500..2000 from step 1", n, st.Curve[0])
	}
	// The first step always gets a scene copy; later ones only while watched and due.
	if !live.WantScene(1) {
		t.Fatal("no scene wanted at the first step")
	}
	live.Scene(1, splattest.RandomScene(1, 3, 0, 1), 0)
	if live.WantScene(2) {
		t.Fatal("a second copy wanted while the first is encoding")
	}
}

func TestServeShutsDown(t *testing.T) {
	srv := viewer.New(viewer.Options{Title: "t"})
	ln, url, loopback, err := viewer.Listen("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !loopback || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("Listen: %s, loopback %v", url, loopback)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	if resp, err := http.Get(url + "api/info"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("while serving: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Fatal("the port still accepts connections after shutdown")
	}
	if _, _, _, err := viewer.Listen("127.0.0.1", 70000); err == nil {
		t.Fatal("port 70000 accepted")
	}
}
