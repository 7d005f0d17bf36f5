package htmlreport

import (
	_ "embed"
	"html/template"
)

var (
	//go:embed page.html.tmpl
	pageTemplate string
	//go:embed page.css
	pageCSS string
	//go:embed page.js
	pageJS string
)

// page is the report's template; its style and script are inlined, so the
// file is the whole page.
var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"css": func() template.CSS { return template.CSS(pageCSS) },
	"js":  func() template.JS { return template.JS(pageJS) },
}).Parse(pageTemplate))
