package htmlreport

// Colours from Okabe and Ito's palette, told apart with the common kinds
// of colour blindness; lines also differ by dash, for print and for the
// rest.
const (
	colorOrange    = "#E69F00"
	colorSky       = "#56B4E9"
	colorGreen     = "#009E73"
	colorYellow    = "#F0E442"
	colorBlue      = "#0072B2"
	colorVermilion = "#D55E00"
	colorPurple    = "#CC79A7"
	colorBlack     = "#000000"
	colorGrey      = "#BBBBBB"
)

// phaseColor is each phase's colour, the same on every plot.
var phaseColor = map[int]string{
	fCompute:  colorBlue,
	fSync:     colorSky,
	fData:     colorOrange,
	fDispatch: colorVermilion,
	fOther:    colorGrey,
}

var boundColor = map[int]string{
	fBoundCompute:   colorBlue,
	fBoundData:      colorOrange,
	fBoundInference: colorVermilion,
	fBoundBalanced:  colorPurple,
}

// seriesStyles tell up to eight lines apart (GPUs, capacities).
var seriesStyles = []struct{ color, dash string }{
	{colorBlue, ""}, {colorVermilion, "6 3"}, {colorGreen, "2 2"}, {colorPurple, "8 3 2 3"},
	{colorOrange, "4 4"}, {colorSky, "1 3"}, {colorBlack, "10 4"}, {colorYellow, ""},
}
