// Package colmap reads COLMAP sparse reconstructions (cameras, images,
// points3D) in the binary and the text formats, every camera model included.
// It returns the files' contents as they are; conversion to rlxsplat's
// camera type lives in ToCamera.
package colmap

// CameraModel describes one COLMAP camera model.
type CameraModel struct {
	ID        int32
	Name      string
	NumParams int
}

// Camera is one entry of cameras.bin / cameras.txt.
type Camera struct {
	ID            uint32
	Model         string // COLMAP model name, e.g. "PINHOLE"
	Width, Height uint64
	Params        []float64
}

// Image is one entry of images.bin / images.txt. Q and T give the
// world-to-camera pose (Q as w,x,y,z).
type Image struct {
	ID       uint32
	Q        [4]float64
	T        [3]float64
	CameraID uint32
	Name     string
	Points2D []Point2D
}

// Point2D is one keypoint of an image; Point3DID is -1 when unmatched.
type Point2D struct {
	X, Y      float64
	Point3DID int64
}

// Point3D is one entry of points3D.bin / points3D.txt.
type Point3D struct {
	ID    uint64
	XYZ   [3]float64
	RGB   [3]uint8
	Error float64
	Track []TrackElem
}

// TrackElem names an observation of a 3D point.
type TrackElem struct {
	ImageID    uint32
	Point2DIdx uint32
}

// Model is a whole sparse reconstruction.
type Model struct {
	Cameras map[uint32]Camera
	Images  []Image // sorted by Name
	Points  []Point3D
}
