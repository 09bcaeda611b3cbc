//! Procedural macros of the RustStream guest SDK. Use them through the `ruststream` crate:
//! `#[subscriber(..)]` turns a handler function into a registrable subscriber, `#[service]`
//! makes the service function the component's entry point.

#![forbid(unsafe_code)]

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, FnArg, ItemFn, ReturnType, Token, Type};

/// Declares a handler function as a subscriber of a stream:
///
/// ```text
/// #[subscriber(KinesisStream::new("ledger"))]
/// async fn book(entry: &Entry) -> HandlerOutcome { .. }
/// ```
///
/// The function takes the decoded input by reference (`&Raw` for the undecoded payload) and,
/// optionally, `ctx: &mut Context<'_>`;
/// it returns `HandlerOutcome`, `()` (ack) or `Result<(), E>` (`Err` drops the record).
/// Settings may follow the stream: `on_failure(panic = drop, decode = retry)` and
/// `start_at(KinesisPosition::horizon())`. The function becomes a unit value of the same name,
/// to include with `b.include(book)`; its body stays callable as `book::call(..)`.
#[proc_macro_attribute]
pub fn subscriber(args: TokenStream, item: TokenStream) -> TokenStream {
    let args = match Punctuated::<Expr, Token![,]>::parse_terminated.parse(args) {
        Ok(args) => args,
        Err(error) => return error.to_compile_error().into(),
    };
    let function = syn::parse_macro_input!(item as ItemFn);
    expand_subscriber(args, function)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Makes `fn service(broker: KinesisBroker) -> RustStream` the component's entry point: the
/// host calls it once per instance to learn the app and its subscribers.
#[proc_macro_attribute]
pub fn service(args: TokenStream, item: TokenStream) -> TokenStream {
    if !args.is_empty() {
        let args = TokenStream2::from(args);
        return syn::Error::new(args.span(), "`#[service]` takes no arguments")
            .into_compile_error()
            .into();
    }
    let function = syn::parse_macro_input!(item as ItemFn);
    expand_service(function).into()
}

fn expand_subscriber(
    args: Punctuated<Expr, Token![,]>,
    function: ItemFn,
) -> syn::Result<TokenStream2> {
    let mut args = args.into_iter();
    let stream = args.next().ok_or_else(|| {
        syn::Error::new(
            Span::call_site(),
            "expected the stream: #[subscriber(KinesisStream::new(\"name\"))]",
        )
    })?;
    let settings = args.map(setting).collect::<syn::Result<Vec<_>>>()?;
    let signature = HandlerSignature::read(&function)?;

    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = function;
    let name = &sig.ident;
    let name_text = name.to_string();
    let input_type = &signature.input;
    let call_args = if signature.takes_context {
        quote!(input, ctx)
    } else {
        quote!(input)
    };
    let await_call = sig.asyncness.map(|_| quote!(.await));
    let register = if signature.raw {
        quote!(::ruststream::subscriber_raw)
    } else {
        quote!(::ruststream::subscriber)
    };
    let mut body_sig = sig.clone();
    body_sig.ident = format_ident!("call");

    Ok(quote! {
        #(#attrs)*
        #[derive(Clone, Copy, Debug)]
        #[allow(non_camel_case_types)]
        #vis struct #name;

        impl #name {
            /// The handler's body, callable directly (e.g. from unit tests).
            #vis #body_sig #block
        }

        impl ::ruststream::Handle<#input_type> for #name {
            #[allow(unused_variables)]
            fn handle(
                &self,
                input: &#input_type,
                _outs: &(),
                ctx: &mut ::ruststream::Context<'_>,
            ) -> impl ::core::future::Future<
                Output = ::core::result::Result<(), ::ruststream::HandlerOutcome>,
            > {
                async move {
                    ::ruststream::IntoOutcome::into_outcome(Self::call(#call_args) #await_call)
                }
            }
        }

        impl ::ruststream::Declared for #name {
            fn declare(self) -> ::ruststream::Subscriber {
                use ::ruststream::SubscriberSettings as _;
                #register(#stream, self)
                    .name(#name_text)
                    #(#settings)*
                    .build()
            }
        }
    })
}

/// What the handler function takes.
struct HandlerSignature {
    input: Type,
    /// The input is `Raw`: the payload's bytes, not decoded.
    raw: bool,
    takes_context: bool,
}

impl HandlerSignature {
    fn read(function: &ItemFn) -> syn::Result<Self> {
        let sig = &function.sig;
        if !sig.generics.params.is_empty() {
            return Err(syn::Error::new(
                sig.generics.span(),
                "a subscriber function cannot be generic",
            ));
        }
        let mut params = sig.inputs.iter();
        let input = match params.next() {
            Some(FnArg::Typed(param)) => match &*param.ty {
                Type::Reference(reference) if reference.mutability.is_none() => {
                    (*reference.elem).clone()
                }
                other => {
                    return Err(syn::Error::new(
                        other.span(),
                        "the first parameter takes the decoded input by reference, e.g. `entry: &Entry`",
                    ));
                }
            },
            Some(FnArg::Receiver(receiver)) => {
                return Err(syn::Error::new(
                    receiver.span(),
                    "a subscriber is a free function, not a method",
                ));
            }
            None => {
                return Err(syn::Error::new(
                    sig.paren_token.span.join(),
                    "a subscriber takes the decoded input, e.g. `entry: &Entry`",
                ));
            }
        };
        let takes_context = params.next().is_some();
        if let Some(extra) = params.next() {
            return Err(syn::Error::new(
                extra.span(),
                "a subscriber takes the input and optionally `ctx: &mut Context<'_>`, nothing else",
            ));
        }
        if let ReturnType::Type(_, ty) = &sig.output
            && matches!(**ty, Type::ImplTrait(_))
        {
            return Err(syn::Error::new(
                ty.span(),
                "return `HandlerOutcome`, `()` or `Result<(), E>`",
            ));
        }
        let raw = matches!(&input, Type::Path(path)
            if path.path.segments.last().is_some_and(|s| s.ident == "Raw"));
        Ok(Self {
            input,
            raw,
            takes_context,
        })
    }
}

/// One settings clause after the stream, as a method call on the registration.
fn setting(clause: Expr) -> syn::Result<TokenStream2> {
    let Expr::Call(call) = &clause else {
        return Err(unknown_clause(&clause));
    };
    let Expr::Path(path) = &*call.func else {
        return Err(unknown_clause(&clause));
    };
    let Some(ident) = path.path.get_ident() else {
        return Err(unknown_clause(&clause));
    };
    match ident.to_string().as_str() {
        "start_at" => {
            let position = &call.args;
            Ok(quote!(.start_at(#position)))
        }
        "on_failure" => {
            let mut policies = quote!(::ruststream::FailurePolicies::default());
            for arg in &call.args {
                let Expr::Assign(assign) = arg else {
                    return Err(syn::Error::new(
                        arg.span(),
                        "expected `panic = <policy>` or `decode = <policy>`",
                    ));
                };
                let policy = failure_policy(&assign.right)?;
                policies = match &*assign.left {
                    Expr::Path(p) if p.path.is_ident("panic") => {
                        quote!(#policies.with_panic(#policy))
                    }
                    Expr::Path(p) if p.path.is_ident("decode") => {
                        quote!(#policies.with_decode(#policy))
                    }
                    other => {
                        return Err(syn::Error::new(
                            other.span(),
                            "expected `panic` or `decode`",
                        ));
                    }
                };
            }
            Ok(quote!(.on_failure(#policies)))
        }
        _ => Err(unknown_clause(&clause)),
    }
}

fn unknown_clause(clause: &Expr) -> syn::Error {
    syn::Error::new(
        clause.span(),
        "unknown subscriber setting: expected `on_failure(..)` or `start_at(..)`; \
         set `max_attempts`/`dead_letter` where the subscriber is included: \
         `b.include(book).max_attempts(3)`",
    )
}

fn failure_policy(expr: &Expr) -> syn::Result<TokenStream2> {
    let policy = quote!(::ruststream::FailurePolicy);
    match expr {
        Expr::Path(path) if path.path.is_ident("drop") => Ok(quote!(#policy::Drop)),
        Expr::Path(path) if path.path.is_ident("retry") => Ok(quote!(#policy::Retry)),
        Expr::Path(path) if path.path.is_ident("skip") => Ok(quote!(#policy::Skip)),
        Expr::Path(path) if path.path.is_ident("fail_fast") => Err(syn::Error::new(
            expr.span(),
            "`fail_fast` does not exist for components: a guest can never stop the host. \
             A trapped call is a failed attempt (`retry`, the default) or `drop`",
        )),
        Expr::Call(call) if matches!(&*call.func, Expr::Path(p) if p.path.is_ident("retry_after")) =>
        {
            let delay = &call.args;
            Ok(quote!(#policy::RetryAfter(#delay)))
        }
        other => Ok(quote!(#other)),
    }
}

fn expand_service(function: ItemFn) -> TokenStream2 {
    let name = &function.sig.ident;
    quote! {
        #function

        #[doc(hidden)]
        struct __RustStreamComponent;

        impl ::ruststream::__private::Guest for __RustStreamComponent {
            fn describe() -> ::ruststream::__private::App {
                ::ruststream::__private::describe(#name)
            }

            fn handle(
                info: ::ruststream::__private::CallInfo,
                record: ::ruststream::__private::Record,
            ) -> ::ruststream::__private::WitOutcome {
                ::ruststream::__private::handle(#name, info, record)
            }
        }

        impl ::ruststream::__private::BatchGuest for __RustStreamComponent {
            fn handle_batch(
                info: ::ruststream::__private::CallInfo,
                arena: ::std::vec::Vec<u8>,
                records: ::std::vec::Vec<u8>,
                headers: ::std::vec::Vec<u8>,
            ) {
                ::ruststream::__private::handle_batch(#name, info, arena, records, headers)
            }
        }

        ::ruststream::bindings::export!(__RustStreamComponent);
    }
}
