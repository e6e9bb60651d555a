module github.com/cardsign/cardsign

go 1.26

require (
	github.com/go-jose/go-jose/v4 v4.1.8 // indirect
	github.com/gowebpki/jcs v1.0.2 // indirect
)
